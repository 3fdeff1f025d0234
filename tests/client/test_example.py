#!/usr/bin/env python3
"""client/examples/guard, the example of the README and libsemc(3): it
takes a lease, has the keeper refresh it, hands its fencing token to the
resource at each step, and releases."""
import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403


def guard(port, *args):
    env = dict(os.environ, SEMD_PORT=str(port))
    p = subprocess.run([SEMC_GUARD] + list(args), env=env, timeout=60,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    err = p.stderr.decode("utf-8", "replace")
    no_sanitizer_report(err, "guard")
    return p.returncode, p.stdout.decode(), err


def test_guard():
    with start_semd("--semaphore", "db", "1") as d:
        c = d.connect()
        rc, out, err = guard(d.port, "db", "3")
        eq(rc, 0, "guard db 3 exits 0")
        lines = out.splitlines()
        match(lines[0] if lines else "", r"step 1 with token [0-9]+",
              "it prints each step with its token")
        eq(len(lines), 3, "three steps")
        eq(c.info("db")["used"], "0", "it released the permit")
        rc, out, err = guard(d.port, "nosuch")
        eq(rc, 1, "guard on an unknown semaphore exits 1")
        ok("no semaphore" in err, "with semd's message", err)


run(test_guard)
