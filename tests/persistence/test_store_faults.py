#!/usr/bin/env python3
"""Store faults found by adversarial testing (issue 7):

- A key under semd's prefix with the wrong type (a foreign key, an
  operator's mistake) used to block every grant for ever. semd's keys are
  its copy of memory: the write that meets such a key replaces it, says so
  once in the log naming the key, and semd rewrites all its keys.
- A lasting write error (here NOREPLICAS, as with OOM or a key of the wrong
  type before the fix) used to make semd reconnect about 11 times a second
  and log about 50 lines a second. Now the backoff grows until a write
  succeeds and the log says once what is wrong.
"""
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403


def connections_received(r):
    info = r.cmd("INFO", "stats")
    for line in info.splitlines():
        if line.startswith("total_connections_received:"):
            return int(line.split(":")[1])
    raise AssertionError("no total_connections_received in INFO stats")


def test_wrong_type_keys_replaced():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "jobs", "3")
        c = p.connect()
        t1 = expect_token(c, "TRY jobs LEASE 60000")
        wait_redis_tokens(r, "jobs", [t1], "the first lease is in Redis")

        # A foreign string where semd keeps the grants of jobs.
        r.cmd("DEL", "semd:{jobs}:grants")
        r.cmd("SET", "semd:{jobs}:grants", "not semd's")
        t2 = expect_token(c, "TRY jobs LEASE 60000",
                          "a grant is made although semd:{jobs}:grants was "
                          "a string")
        ok(wait_until(lambda: log_count(
            p, "key semd:{jobs}:grants had the wrong type") == 1, 10),
           "the log names the key it replaced, once",
           log_tail(p.d.log_text()))
        wait_redis_tokens(r, "jobs", [t1, t2], "Redis holds both leases "
                          "again: semd rewrote its keys from memory")

        # The index of names as a list, the token bound as a list.
        r.cmd("DEL", "semd:sems")
        r.cmd("RPUSH", "semd:sems", "x")
        expect(c, "CREATE other 2", "OK", "CREATE works with semd:sems a "
               "list")
        ok(wait_until(lambda: r.cmd("TYPE", "semd:sems") == "set" and
                      sorted(r.cmd("SMEMBERS", "semd:sems")) ==
                      ["jobs", "other"], 10),
           "semd:sems is a set of the names again",
           attempt(r.cmd, "TYPE", "semd:sems"))
        r.cmd("DEL", "semd:tokens")
        r.cmd("RPUSH", "semd:tokens", "1")
        ok(wait_until(lambda: r.cmd("TYPE", "semd:tokens") == "string" and
                      int(r.cmd("GET", "semd:tokens")) > t2, 10),
           "semd:tokens is a number above every token again",
           attempt(r.cmd, "TYPE", "semd:tokens"))
        t3 = expect_token(c, "TRY other LEASE 60000", "grants go on")
        ok(t3 > t2, "tokens keep increasing", "%d > %d" % (t3, t2))
        eq(stats_of(c).get("persistence"), "ok", "STATS persistence=ok")

        # What Redis holds is what semd holds.
        ok(wait_until(lambda: redis_as_memory(r) == memory_state(c), 10),
           "Redis matches semd's memory", repr(redis_state(r)))
        eq(p.stop(), 0, "semd exits 0 on SIGTERM")


def test_lasting_write_error_backs_off():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "jobs", "3")
        c = p.connect()
        expect_token(c, "TRY jobs LEASE 60000", "a grant before the fault")

        # Every write is refused from now on, while connections succeed.
        r.cmd("CONFIG", "SET", "min-replicas-to-write", "1")
        conns0 = connections_received(r)
        lines0 = len(p.d.log_lines())
        time.sleep(8)
        conns = connections_received(r) - conns0
        lines = p.d.log_lines()[lines0:]
        note("in 8 s of refused writes: %d connections to Redis, %d log "
             "lines" % (conns, len(lines)))
        ok(conns <= 20, "semd backs off: at most 20 connections to Redis "
           "in 8 s (it used to make about 90)", "%d" % conns)
        ok(len(lines) <= 10, "the log says what is wrong once, not 50 lines "
           "a second: at most 10 lines in 8 s", "\n".join(lines))
        ok(any("NOREPLICAS" in ln for ln in lines),
           "the log names the error (NOREPLICAS)", "\n".join(lines))
        ok(any("lost ownership" in ln for ln in lines),
           "unable to renew its ownership, the owner stepped down",
           "\n".join(lines))
        ok(p.d.alive(), "semd is still running")

        r.cmd("CONFIG", "SET", "min-replicas-to-write", "0")

        def serving():
            try:
                with p.connect() as d:
                    got = d.cmd("TRY jobs LEASE 60000")
                    return got.startswith("OK ")
            except Exception:
                return False
        ok(wait_until(serving, 15, 0.2), "once writes are accepted again "
           "semd resumes and grants", log_tail(p.d.log_text()))
        ok(any("resumed" in ln for ln in p.d.log_lines()),
           "the log says it resumed its epoch", log_tail(p.d.log_text()))
        ok(any("back" in ln for ln in p.d.log_lines()[lines0:]),
           "... and that Redis is back", log_tail(p.d.log_text()))
        eq(p.stop(), 0, "semd exits 0 on SIGTERM")


if __name__ == "__main__":
    run(test_wrong_type_keys_replaced, test_lasting_write_error_backs_off,
        time_limit=120)
