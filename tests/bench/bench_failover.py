#!/usr/bin/env python3
"""bench_failover: how long a standby takes to serve after the owner dies.

Starts a private redis-server and two semd on it, both `standby yes`; the
first becomes the owner. Each run kills the owner with kill -9 and polls
the other with `TRY bench LEASE 60000` (a new connection after every
refusal or close) until it answers `OK <token>`; the failover time is from
the kill to that reply. The killed daemon is restarted as a standby on its
port, so the roles swap from run to run. Prints the median of RUNS runs
with min and max, and each figure; asserts nothing about speed, exits 1
only if a standby did not take over within 30 s.

    make bench                      # from the build directory
    SEMD_BIN=daemon/semd python3 tests/bench/bench_failover.py --runs 5

The figure is about owner-lease (default 3 s: the owner's key must expire
in Redis) plus the standby's poll interval; --owner-lease changes it.
"""
import argparse
import os
import signal
import statistics
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
import redistest  # noqa: E402
from redistest import (PSemd, start_redis, role_at, poll_grant,  # noqa
                       log_tail)
import semdtest  # noqa: E402


def owner_of(daemons, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for i, p in enumerate(daemons):
            ro = role_at(p.port, 1.0)
            if ro is not None and ro["role"] == "owner":
                return i
        time.sleep(0.02)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--owner-lease", default=None,
                    help="semd owner-lease (default: semd's own, 3s)")
    a = ap.parse_args()
    args = ["--semaphore", "bench", "1000000", "--standby", "yes"]
    if a.owner_lease:
        args += ["--owner-lease", a.owner_lease]
    status = 0
    figures = []
    try:
        with start_redis() as r:
            daemons = [PSemd(r, args, grace="10s") for _ in range(2)]
            for run in range(a.runs):
                v = owner_of(daemons)
                if v is None:
                    print("no owner among the two daemons")
                    status = 1
                    break
                o = 1 - v
                d = daemons[v].d
                d.check_exit = False
                t0 = time.monotonic()
                d.stop(sig=signal.SIGKILL, quiet=True)
                tok, t1, last = poll_grant(daemons[o].port,
                                           "TRY bench LEASE 60000", 30.0,
                                           0.005)
                if tok is None:
                    print("run %d: the standby did not grant within 30 s "
                          "(last reply %r); its log:\n%s" %
                          (run + 1, last, log_tail(daemons[o].log_text())))
                    status = 1
                    break
                figures.append(t1 - t0)
                print("run %d: owner %s killed, first grant by %s after "
                      "%.3f s" % (run + 1, "AB"[v], "AB"[o], t1 - t0))
                daemons[v].start()
            asan = semdtest.sanitized(semdtest.SEMD_BIN)
            print("semd %s%s" % (semdtest.SEMD_BIN, " (AddressSanitizer "
                                 "build)" if asan else ""))
            if figures:
                print("failover (owner kill -9 -> first grant by the new "
                      "owner), owner-lease %s: median %.3f s, min %.3f s, "
                      "max %.3f s over %d runs" %
                      (a.owner_lease or "3s (default)",
                       statistics.median(figures), min(figures),
                       max(figures), len(figures)))
            for p in daemons:
                p.d.stop(quiet=True)
    except Exception as e:
        print("bench_failover: %s: %s" % (type(e).__name__, e))
        status = 1
    finally:
        redistest._stop_everything()
    sys.exit(status)


if __name__ == "__main__":
    main()
