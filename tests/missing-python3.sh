#!/bin/sh
# In TESTS when configure did not find python3: the integration, persistence,
# client and service tests are Python scripts.
echo "FAIL - the integration tests need python3, which configure did not" \
    "find: install it (Debian: apt-get install python3) and run configure again"
exit 1
