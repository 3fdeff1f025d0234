#!/bin/sh
# install-deps.sh: install the Debian packages semd needs to build and
# test, when any is missing. Safe to run again; does nothing when all
# are there. Needs root (or sudo) only when something must be installed.
set -eu

PACKAGES="build-essential autoconf automake libtool pkg-config libevent-dev
libhiredis-dev libedit-dev libsystemd-dev check uthash-dev python3
netcat-openbsd redis-server redis-sentinel python3-venv python3-setuptools mypy golang-go
libfaketime valgrind"

missing=""
for p in $PACKAGES; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
	    grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "install-deps: installing$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
