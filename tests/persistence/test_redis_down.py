#!/usr/bin/env python3
"""Redis unreachable in sync mode: while it is SIGSTOPped or killed, new
grants get ERR UNAVAILABLE and nothing is granted, queued waiters stay
queued and get no reply, REFRESH is refused, RELEASE works; semd recovers
when Redis is back (the waiter is then granted) and writes what changed; a
Redis that comes back empty (FLUSHALL, restart without data) is
repopulated from memory; semd waits for Redis at start-up; the STATS
persistence fields. semd never crashes and exits 0 on SIGTERM.

The outages here last longer than the default owner-lease (3 s), after
which an owner must give up its ownership and close its clients
(test_ownership.py, test_partition.py). These tests are about what semd
does while it still owns the data set, so they run with a long lease."""
import os
import sys
import time

sys.dont_write_bytecode = True
# ...and the deepest pipeline: a failure fails the most batches in flight.
LONG_LEASE = ("--owner-lease", "60s", "--persistence-pipeline", "64")
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403


def check_down(c, how):
    st = wait_persistence(c, "down")
    eq(st.get("persistence"), "down", "STATS persistence=down while Redis "
       "is %s" % how)
    err = st.get("persistence_last_error", "")
    ok(err not in ("", "-") and " " not in err,
       "STATS persistence_last_error is set, one word", repr(err))


def check_back(c, how):
    st = wait_persistence(c, "ok")
    eq(st.get("persistence"), "ok", "STATS persistence=ok again after %s"
       % how)


def test_sigstopped():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "s", "3",
                             "--semaphore", "q", "2", *LONG_LEASE)
        a, b, w, x = p.connect(), p.connect(), p.connect(), p.connect()
        tl = expect_token(a, "ACQUIRE s LEASE 60000")
        tb = expect_token(b, "ACQUIRE s")
        tq = expect_token(b, "ACQUIRE q 2")
        w.send("ACQUIRE q 2 TIMEOUT 60000\r\n")
        ok(wait_until(lambda: x.info("q")["waiters"] == "1", 10),
           "ACQUIRE q 2 queues behind used=2 of 2")
        check_back(x, "start-up")

        r.pause()
        t0 = time.monotonic()
        got = x.cmd("TRY s", timeout=15)
        is_err(got, "UNAVAILABLE", "TRY s right after SIGSTOP -> ERR "
               "UNAVAILABLE (its write cannot be acknowledged)")
        note("TRY answered %.2f s after the SIGSTOP" %
             (time.monotonic() - t0))
        check_down(x, "SIGSTOPped")
        expect_err(x, "TRY s", "UNAVAILABLE", "TRY s while down -> ERR "
                   "UNAVAILABLE")
        got = x.cmd("ACQUIRE s TIMEOUT 5000 LEASE 1000", timeout=15)
        is_err(got, "UNAVAILABLE", "ACQUIRE s TIMEOUT 5000 LEASE 1000 while "
               "down -> ERR UNAVAILABLE")
        info = x.info("s")
        eq((info["used"], info["holders"], info["waiters"]), ("2", "2", "0"),
           "INFO s: used=2 holders=2 waiters=0, nothing granted")
        expect_err(x, "REFRESH s %d 60000" % tl, "UNAVAILABLE",
                   "REFRESH while down -> ERR UNAVAILABLE")
        expect(b, "RELEASE s %d" % tb, "OK", "RELEASE while down -> OK")
        eq(x.info("s")["used"], "1", "the release took effect in memory")
        expect(b, "RELEASE q %d" % tq, "OK", "RELEASE q while down -> OK")
        ok(w.no_reply(1.5), "the queued ACQUIRE q 2 gets no reply while "
           "Redis is down, though q is free")
        ws = x.listing("WAITERS q")
        ok(len(ws) == 1 and ws[0].get("n") == "2", "WAITERS q: it is still "
           "queued", repr(ws))
        expect(x, "PING", "OK PONG", "semd still answers PING")

        r.resume()
        check_back(x, "SIGCONT")
        got = w.try_line(20)
        tw = is_token(got or "", "the queued ACQUIRE q 2 is granted after "
                      "recovery")
        ok(wait_until(lambda: {n: sorted(v["grants"]) for n, v in
                               redis_state(r)["sems"].items()} ==
                      {"s": [tl], "q": [tw]}, 10),
           "Redis: the releases made while down are written, the new grant "
           "is there", repr(redis_state(r)))
        expect(x, "REFRESH s %d 60000" % tl, "OK 60000",
               "REFRESH works again")
        expect(w, "RELEASE q %d" % tw, "OK")
        expect_token(x, "TRY s", "TRY s works again")
        ok(p.d.alive(), "semd stayed up")
        p.stop()


def test_killed_and_restarted():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "s", "2", *LONG_LEASE)
        a, x = p.connect(), p.connect()
        t1 = expect_token(a, "ACQUIRE s")
        r.kill()
        check_down(x, "killed")
        expect_err(x, "TRY s", "UNAVAILABLE", "TRY s while Redis is killed "
                   "-> ERR UNAVAILABLE")
        expect_err(x, "ACQUIRE s TIMEOUT 3000", "UNAVAILABLE",
                   "ACQUIRE s TIMEOUT 3000 while killed -> ERR UNAVAILABLE")
        eq(x.info("s")["used"], "1", "INFO used=1: nothing granted")
        expect(a, "RELEASE s %d" % t1, "OK", "RELEASE while killed -> OK")
        eq(x.info("s")["used"], "0", "the release took effect")
        time.sleep(2.5)     # a few reconnection attempts
        expect(x, "PING", "OK PONG", "semd answers PING during the outage")
        r.restart()         # same port, same data
        check_back(x, "Redis restarted with its data")
        wait_redis_tokens(r, "s", [], "the release made while Redis was "
                          "down is written once it is back")
        t2 = expect_token(x, "TRY s", "TRY s is granted again")
        ok(t2 > t1, "the new token is above the old one", "%d, %d" % (t2, t1))
        ok(p.d.alive(), "semd stayed up")
        p.stop()


def repopulated(r, c):
    """Redis has semd's memory again: same semaphores, capacities and
    grants (n, kind), and semd:tokens at least the highest token."""
    mem = memory_state(c)
    top = max([t for s in mem.values() for t in s["grants"]] or [0])
    st = r.cmd("GET", "semd:tokens")
    return (redis_as_memory(r) == mem and st is not None and
            int(st) >= top)


def test_repopulated_when_empty():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "s", "3", grace="5s")
        a, x = p.connect(), p.connect()
        expect(a, "CREATE dyn 2", "OK")
        tb = expect_token(a, "ACQUIRE s 2")
        tl = expect_token(a, "ACQUIRE dyn LEASE 60000")
        ok(wait_until(lambda: repopulated(r, x), 10),
           "Redis matches semd's memory", repr(redis_state(r)))

        eq(r.cmd("FLUSHALL"), "OK", "FLUSHALL while semd runs")
        ok(wait_until(lambda: repopulated(r, x), 20, 0.2),
           "after FLUSHALL semd repopulates Redis (semaphores, grants, "
           "semd:tokens)", "redis %r; memory %r" % (redis_state(r),
                                                     memory_state(x)))
        expect_token(x, "TRY s", "grants work after the FLUSHALL")

        r.restart(empty=True)
        ok(wait_until(lambda: repopulated(r, x), 20, 0.2),
           "after Redis restarted without its data semd repopulates it",
           "redis %r; memory %r" % (redis_state(r), memory_state(x)))
        check_back(x, "the empty restart")

        before = memory_state(x)
        p.restart()         # kill -9 semd: the repopulated data is usable
        y = p.connect()
        after = memory_state(y)
        eq({n: (s["capacity"], sorted(s["grants"].items()))
            for n, s in after.items()},
           {n: (s["capacity"], sorted(s["grants"].items()))
            for n, s in before.items()},
           "kill -9 after the repopulation: semd loads the same semaphores "
           "and grants")
        ok(tb in after["s"]["grants"] and tl in after["dyn"]["grants"],
           "including the grants made before the FLUSHALL")
        p.stop()


def test_waits_for_redis_at_startup():
    with start_redis() as r:
        r.stop()
        p = PSemd(r, ["--semaphore", "s", "1"], grace="2s", start=False)
        p.start(wait_ready=False)
        time.sleep(3)
        text = p.log_text()
        ok(p.d.alive(), "semd keeps running while Redis is unreachable at "
           "start-up", log_tail(text))
        ok("listening on" not in text, "... and does not listen before it "
           "has loaded from Redis", log_tail(text))
        r.start()
        try:
            p.wait_ready(30)
            up = True
        except Exception as e:
            up = False
            note(str(e))
        ok(up, "semd loads and listens once Redis is up")
        if up:
            c = p.connect()
            expect_token(c, "TRY s", "and grants")
        p.stop()


def test_stats_fields():
    d = start_semd("--semaphore", "s", "1")
    st = d.connect().stats()
    eq((st.get("persistence"), st.get("persistence_mode")), ("off", "none"),
       "without redis: persistence=off persistence_mode=none")
    d.stop()
    with start_redis() as r:
        p = start_semd_redis(r)
        st = p.connect().stats()
        eq((st.get("persistence"), st.get("persistence_mode"),
            st.get("persistence_backlog"), st.get("redis_durability")),
           ("ok", "sync", "0", "ok"), "with redis (appendonly yes, "
           "appendfsync always): persistence=ok persistence_mode=sync "
           "persistence_backlog=0 redis_durability=ok")
        eq(st.get("persistence_last_error"), "-",
           "persistence_last_error=- when none")
        eq(st.get("redis_master"), "127.0.0.1:%d" % r.port,
           "redis_master: the server the writes go to")
        p.stop()
    for kw, want in (({"appendonly": False}, "appendonly-off"),
                     ({"fsync": "everysec"}, "appendfsync-everysec")):
        with start_redis(**kw) as r:
            p = start_semd_redis(r, "--persistence", "async")
            st = p.connect().stats()
            eq((st.get("persistence_mode"), st.get("redis_durability")),
               ("async", want), "redis %r: persistence_mode=async "
               "redis_durability=%s" % (kw, want))
            key = want.split("-")[0]
            ok([ln for ln in p.d.log_lines() if " warn" in ln and key in ln],
               "and semd logs a warning about %s" % key,
               log_tail(p.log_text()))
            p.stop()


run(test_sigstopped, test_killed_and_restarted, test_repopulated_when_empty,
    test_waits_for_redis_at_startup, test_stats_fields, time_limit=180)
