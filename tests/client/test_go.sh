#!/bin/sh
# test_go.sh: the Go client's tests (client/go) under make check, when
# configure found go. `go vet` and gofmt, then `go test -race -v` against the semd
# of this build (SEMD_BIN); each Go test and subtest becomes one
# "ok - go: Name" or "FAIL - go: Name" line, which tests/totals.sh counts.
# Offline and self-contained: GOPROXY=off (standard library only, nothing
# is downloaded), GOFLAGS cleared, and a private GOCACHE and GOPATH under
# the build directory (HOME may be unset); the sources are only read, so
# an out-of-tree build (make distcheck) works.
set -u
GO=${GO:-go}
src=${SEMD_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}/client/go
build=${SEMD_BUILDDIR:-$(pwd)}/tests/client/go-build
mkdir -p "$build/cache" "$build/path" || exit 1
GOCACHE=$build/cache GOPATH=$build/path GOPROXY=off GOFLAGS= GOENV=off \
GOTOOLCHAIN=local GO111MODULE=on
export GOCACHE GOPATH GOPROXY GOFLAGS GOENV GOTOOLCHAIN GO111MODULE
cd "$src" || exit 1

status=0
if out=$("$GO" vet ./... 2>&1); then
	echo "ok - go vet ./... is clean"
else
	echo "FAIL - go vet ./...:"
	echo "$out" | sed 's/^/#   /'
	status=1
fi

gofmt=$("$GO" env GOROOT)/bin/gofmt
if [ -x "$gofmt" ]; then
	if out=$("$gofmt" -l . 2>&1) && [ -z "$out" ]; then
		echo "ok - gofmt -l finds nothing to reformat"
	else
		echo "FAIL - gofmt -l: $out"
		status=1
	fi
fi

race=-race
if [ "$("$GO" env CGO_ENABLED)" != 1 ]; then
	echo "# cgo is off: go test runs without -race"
	race=
fi
log=$build/go-test.log
"$GO" test $race -count=1 -timeout 15m -v ./... >"$log" 2>&1
rc=$?
sed 's/^/# /' "$log"
sed -n 's/^ *--- PASS: \([^ ]*\).*/ok - go: \1/p' "$log"
sed -n 's/^ *--- FAIL: \([^ ]*\).*/FAIL - go: \1/p' "$log"
sed -n 's/^ *--- SKIP: \([^ ]*\).*/# SKIP go: \1/p' "$log"
if [ $rc -ne 0 ]; then
	grep -q -- '--- FAIL' "$log" ||
	    echo "FAIL - go test exited $rc (build failure, panic or timeout; see the log above)"
	status=1
fi
exit $status
