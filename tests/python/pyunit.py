"""pyunit: runs the unittest cases of a Python-client test script under
`make check` and reports them as the other integration tests do.

A script in tests/python/ does

    import pyunit                       # sets sys.path: semd, semdtest
    from semdtest import start_semd
    import semd
    class Fifo(unittest.TestCase): ...
    if __name__ == "__main__":
        pyunit.main(time_limit=120)

Each test case prints one line, "ok - Class.test_x" or "FAIL -
Class.test_x: why" (tests/totals.sh counts them), a skipped case "#
skip ..."; the harness's own checks (semd exits 0, no sanitizer report)
print their lines too. Exit 0 when all passed, 1 otherwise, 77 when every
case was skipped. Daemons and Redis servers are stopped by PID whatever
happens (semdtest's and redistest's atexit, and a watchdog alarm).
"""

import os
import signal
import sys
import traceback
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
TESTS_DIR = os.environ.get("SEMD_TESTS") or os.path.dirname(HERE)
SRCDIR = os.environ.get("SEMD_SRCDIR") or os.path.dirname(TESTS_DIR)
PACKAGE_DIR = os.path.join(SRCDIR, "client", "python")
for p in (HERE, TESTS_DIR, PACKAGE_DIR):
    if p not in sys.path:
        sys.path.insert(0, p)

import semdtest  # noqa: E402


def emit(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class _Result(unittest.TestResult):
    """One ok/FAIL line per test case, as it ends."""

    def __init__(self):
        super().__init__()
        self.passed = 0
        self.failed = 0
        self.skipped_n = 0

    @staticmethod
    def _name(test):
        return "%s.%s" % (type(test).__name__, test._testMethodName)

    def startTest(self, test):
        super().startTest(test)
        semdtest._current = self._name(test)
        emit("# --- %s" % self._name(test))

    def addSuccess(self, test):
        self.passed += 1
        emit("ok - %s" % self._name(test))

    def _fail(self, test, err):
        self.failed += 1
        text = "".join(traceback.format_exception(*err))
        last = text.strip().splitlines()[-1] if text.strip() else "?"
        emit("FAIL - %s: %s" % (self._name(test), last))
        semdtest.note(text)

    def addFailure(self, test, err):
        self._fail(test, err)

    def addError(self, test, err):
        self._fail(test, err)

    def addSkip(self, test, reason):
        self.skipped_n += 1
        emit("# skip %s: %s" % (self._name(test), reason))

    def stopTest(self, test):
        super().stopTest(test)
        # Whatever the test left running is stopped by PID now.
        for d in list(semdtest._live):
            d.stop()
        semdtest._current = ""


def _watchdog(signum, frame):
    emit("FAIL - %s: watchdog: the script ran over its time limit"
         % (semdtest._current or "script"))
    semdtest._stop_all()
    os._exit(1)


def main(time_limit=120):
    """Run the TestCases of __main__; exit 0, 1, or 77 (all skipped)."""
    if not os.access(semdtest.SEMD_BIN, os.X_OK):
        emit("FAIL - SEMD_BIN is an executable: %r is not"
             % semdtest.SEMD_BIN)
        sys.exit(1)
    signal.signal(signal.SIGALRM, _watchdog)
    signal.alarm(time_limit)
    suite = unittest.defaultTestLoader.loadTestsFromModule(
        sys.modules["__main__"])
    result = _Result()
    suite.run(result)
    signal.alarm(0)
    semdtest._stop_all()
    # The harness's own checks count too (semd exited 0, no sanitizer).
    failed = result.failed + semdtest._failed
    semdtest.note("%d cases passed, %d failed, %d skipped" % (
        result.passed, result.failed, result.skipped_n))
    if result.passed + result.failed == 0:
        if result.skipped_n:
            print("SKIP: every case was skipped")
            sys.exit(77)
        emit("FAIL - no test case ran")
        sys.exit(1)
    sys.exit(1 if failed else 0)
