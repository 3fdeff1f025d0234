#!/usr/bin/env bash
# totals.sh BUILDDIR: print "PASSED FAILED" over the last `make check`:
# every Check test case and every "ok -"/"FAIL -" line of the integration
# scripts counts once; a script that failed without saying why counts as
# one failure.
set -u
dir=${1:-.}
passed=0
failed=0
for trs in "$dir"/tests/*.trs "$dir"/tests/*/*.trs; do
	[ -f "$trs" ] || continue
	log=${trs%.trs}.log
	p=0
	f=0
	summary=$(grep -Eo 'Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' \
	    "$log" 2>/dev/null | tail -n1)
	if [ -n "$summary" ]; then
		set -- $summary
		total=${2%,}
		f=$(( ${4%,} + $6 ))
		p=$(( total - f ))
	else
		p=$(grep -c '^ok - ' "$log" 2>/dev/null)
		f=$(grep -c '^FAIL - ' "$log" 2>/dev/null)
	fi
	if grep -Eq '^:test-result: (FAIL|ERROR)' "$trs" && [ "$f" -eq 0 ]; then
		f=1
	fi
	passed=$(( passed + p ))
	failed=$(( failed + f ))
done
echo "$passed $failed"
