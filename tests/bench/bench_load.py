#!/usr/bin/env python3
"""bench_load: how long semd takes to load a big store at start-up.

Fills a private redis-server with GRANTS grants over SEMS semaphores in
semd's key layout (raw RESP pipelining), starts semd against it and prints
the load time from semd's `loaded ...` log line, the wall time from the
start of the process until it logged `listening on`, and its RSS. It
prints figures and asserts nothing about speed; it exits 1 only if semd
does not start or does not load what was written.

    make bench                      # from the build directory
    SEMD_BIN=daemon/semd python3 tests/bench/bench_load.py --grants 100000

A build with --enable-sanitizers is several times slower and bigger; the
figures say which build was measured.
"""
import argparse
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
import redistest  # noqa: E402
from redistest import (PREFIX, start_redis, start_semd, loaded_line,  # noqa
                       log_tail)
import semdtest  # noqa: E402


def fill(r, grants, sems, prefix=PREFIX, chunk=1000):
    """Write SEMS semaphores and GRANTS grants (every third one a lease
    ending in an hour, the others connection-bound); returns the highest
    token."""
    conn = r.connect()
    per = -(-grants // sems)
    deadline = int(time.time() * 1000) + 3600 * 1000
    cmds = []
    tok = 0
    for i in range(sems):
        name = "bench%03d" % i
        cmds.append(("SADD", prefix + "sems", name))
        cmds.append(("HSET", "%s{%s}:sem" % (prefix, name), "capacity",
                     str(per)))
        key = "%s{%s}:grants" % (prefix, name)
        todo = min(per, grants - tok)
        while todo > 0:
            k = min(chunk, todo)
            args = ["HSET", key]
            for _ in range(k):
                tok += 1
                if tok % 3 == 0:
                    v = "n=1 kind=lease deadline_ms=%d" % deadline
                else:
                    v = "n=1 kind=conn deadline_ms=0"
                args += [str(tok), v]
            cmds.append(tuple(args))
            todo -= k
        if len(cmds) >= 50:
            check(conn.pipeline(cmds))
            cmds = []
    cmds.append(("SET", prefix + "tokens", str(tok + 1000)))
    check(conn.pipeline(cmds))
    conn.close()
    return tok


def check(replies):
    errs = [e for e in replies if isinstance(e, Exception)]
    if errs:
        raise RuntimeError("redis refused the fill: %s" % errs[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grants", type=int, default=100000)
    ap.add_argument("--sems", type=int, default=100)
    ap.add_argument("--fsync", default="always",
                    help="redis appendfsync (always, everysec, no)")
    a = ap.parse_args()
    status = 0
    try:
        with start_redis(fsync=a.fsync) as r:
            t = time.monotonic()
            top = fill(r, a.grants, a.sems)
            fill_s = time.monotonic() - t
            mem = r.cmd("INFO", "memory")
            used = [ln for ln in mem.splitlines()
                    if ln.startswith("used_memory_human:")]
            print("filled redis: %d semaphores, %d grants (tokens 1..%d) "
                  "in %.2f s; %s; dbsize %d" %
                  (a.sems, a.grants, top, fill_s,
                   used[0] if used else "?", r.cmd("DBSIZE")))
            t = time.monotonic()
            d = start_semd("--redis", r.addr(), "--reclaim-grace", "10m",
                           timeout=600)
            wall_ms = (time.monotonic() - t) * 1000
            rss = d.rss_kb()
            text = d.log_text()
            ld = loaded_line(text)
            asan = semdtest.sanitized(semdtest.SEMD_BIN)
            print("semd %s%s" % (semdtest.SEMD_BIN, " (AddressSanitizer "
                                 "build: slower, bigger)" if asan else ""))
            if ld is None:
                print("no 'loaded S semaphores, G grants (U unowned) in T "
                      "ms' line in semd's log:\n%s" % log_tail(text))
                status = 1
            else:
                print("semd log: loaded %d semaphores, %d grants (%d "
                      "unowned) in %g ms" % (ld["sems"], ld["grants"],
                                             ld["unowned"], ld["ms"]))
                if (ld["sems"], ld["grants"]) != (a.sems, a.grants):
                    print("MISMATCH: wrote %d semaphores and %d grants" %
                          (a.sems, a.grants))
                    status = 1
            print("wall time from exec to 'listening on' and 'ready': "
                  "%.0f ms" % wall_ms)
            print("semd RSS after the load: %s kB" % rss)
            c = d.connect()
            st = c.stats()
            print("STATS: semaphores=%s grants=%s persistence=%s" %
                  (st.get("semaphores"), st.get("grants"),
                   st.get("persistence")))
            d.stop()
    except Exception as e:
        print("bench_load: %s: %s" % (type(e).__name__, e))
        status = 1
    finally:
        redistest._stop_everything()
    if semdtest._failed:
        status = 1
    sys.exit(status)


if __name__ == "__main__":
    main()
