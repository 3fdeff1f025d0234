"""semd starts and serves under valgrind, which keeps some real-time
signals for itself (semd used to die with "cannot handle SIGRTMIN+30").
Skipped when valgrind is missing or the binary has AddressSanitizer,
which valgrind cannot run.
"""

import os
import shutil
import stat
import sys
import tempfile

sys.path.insert(0, os.environ.get("SEMD_TESTS") or
                os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import semdtest  # noqa: E402
from semdtest import eq, ok, run, sanitized, skip, start_semd  # noqa: E402


def test_starts_under_valgrind():
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        skip("valgrind is not installed")
    if sanitized(semdtest.SEMD_BIN):
        skip("semd is built with AddressSanitizer, which valgrind cannot run")
    # The harness runs SEMD_BIN ARGS...: a wrapper that execs valgrind
    # keeps the PID, so the daemon is still stopped by its PID.
    tmp = tempfile.mkdtemp(prefix="semdtest-vg.")
    wrapper = os.path.join(tmp, "semd-under-valgrind")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec %s -q --error-exitcode=99 %s \"$@\"\n" %
                (valgrind, semdtest.SEMD_BIN))
    os.chmod(wrapper, stat.S_IRWXU)
    real, semdtest.SEMD_BIN = semdtest.SEMD_BIN, wrapper
    try:
        d = start_semd("--semaphore", "s", "1", timeout=60)
    finally:
        semdtest.SEMD_BIN = real
    with d:
        c = d.connect()
        eq(c.cmd("PING", timeout=20), "OK PONG", "PING under valgrind")
        ok(c.cmd("ACQUIRE s", timeout=20).startswith("OK "),
           "ACQUIRE under valgrind")
    # d.stop() checked the exit status: 0, so valgrind found no error.
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    run(test_starts_under_valgrind, time_limit=120)
