#!/bin/sh
# In TESTS when configure did not find Check: the unit suites cannot run.
echo "FAIL - the unit tests need Check, which configure did not find:" \
    "install it (Debian: apt-get install check) and run configure again"
exit 1
