#!/usr/bin/env python3
"""persistence async: grants are answered at once and written behind, in
order, so Redis ends up with the final state of a sequence of changes; a
kill -9 after a quiet moment loses nothing; while Redis is down grants go
on and STATS persistence_backlog grows, then drains to 0 when it is back;
past persistence-backlog the backlog is dropped (it never exceeds the
bound) and Redis is rewritten from memory."""
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403


def backlog(c):
    v = stats_of(c).get("persistence_backlog", "")
    return int(v) if v.isdigit() else None


def in_sync(r, c):
    """Redis matches memory and nothing is pending."""
    try:
        return backlog(c) == 0 and redis_as_memory(r) == memory_state(c)
    except Exception:
        return False


def wait_in_sync(r, c, desc, timeout=20):
    good = wait_until(lambda: in_sync(r, c), timeout, 0.2)
    return ok(good, desc, None if good else "backlog %s; redis %s; memory %s"
              % (attempt(backlog, c), attempt(redis_as_memory, r),
                 attempt(memory_state, c)))


def wait_down(c):
    eq(wait_persistence(c, "down").get("persistence"), "down",
       "STATS persistence=down once Redis is killed")


def churn(a, b, rounds):
    """Acquire/release/revoke traffic on s from two connections, plus
    CREATE/RESIZE/DELETE; leaves a known final state. Returns the tokens
    still held."""
    for i in range(rounds):
        t1 = token_of(a, "ACQUIRE s")
        t2 = token_of(b, "ACQUIRE s 2 LEASE 60000")
        a.cmd("RELEASE s %d" % t1)
        b.cmd("REVOKE s %d" % t2)
        a.cmd("CREATE tmp%d 3" % (i % 3))
        a.cmd("RESIZE tmp%d %d" % (i % 3, 1 + i))
        if i % 2:
            a.cmd("DELETE tmp%d" % (i % 3))
    keep_bound = expect_token(a, "ACQUIRE s", "final ACQUIRE s")
    keep_lease = expect_token(b, "ACQUIRE s 2 LEASE 60000",
                              "final ACQUIRE s 2 LEASE 60000")
    expect(a, "RESIZE s 5", "OK")
    return keep_bound, keep_lease


def test_async_order_and_kill9():
    with start_redis() as r:
        p = start_semd_redis(r, "--persistence", "async")
        a, b = p.connect(), p.connect()
        expect(a, "CREATE s 4", "OK")
        eq(stats_of(a).get("persistence_mode"), "async",
           "STATS persistence_mode=async")
        kb, kl = churn(a, b, 40)
        eq(sorted(holders(a, "s")), sorted([kb, kl]),
           "memory: only the two final grants of s")
        wait_in_sync(r, a, "Redis ends with the final state of 40 rounds "
                     "of changes (written in order), backlog 0")
        st = redis_state(r)
        ok(st["tokens"] is not None and st["tokens"] >= max(kb, kl),
           "semd:tokens >= every token issued", repr(st["tokens"]))
        before = memory_state(a)
        time.sleep(0.5)                     # a quiet moment
        p.restart()
        x = p.connect()
        eq(memory_state(x), before, "kill -9 after a quiet moment: the same "
           "semaphores, capacities, tokens, n and kind after the restart")
        tn = expect_token(x, "TRY s")
        ok(tn > max(kb, kl), "new tokens are above the old ones",
           "%d vs %d" % (tn, max(kb, kl)))
        p.stop()


def test_async_backlog_drains():
    with start_redis() as r:
        p = start_semd_redis(r, "--persistence", "async",
                             "--semaphore", "s", "1000")
        c = p.connect()
        old = expect_token(c, "ACQUIRE s LEASE 60000")
        wait_in_sync(r, c, "in sync before the outage")
        r.kill()
        wait_down(c)
        expect_token(c, "ACQUIRE s", "ACQUIRE s while Redis is down: "
                     "granted at once (async)")
        for i in range(9):
            token_of(c, "ACQUIRE s")
        b1 = backlog(c)
        for i in range(10):
            token_of(c, "ACQUIRE s LEASE 60000")
        expect(c, "RELEASE s %d" % old, "OK")
        b2 = backlog(c)
        ok(b1 is not None and b2 is not None and 0 < b1 < b2,
           "STATS persistence_backlog grows while Redis is down",
           "after 10 grants %r, after 21 changes %r" % (b1, b2))
        eq(c.info("s")["used"], "20", "INFO used=20")
        r.restart()                         # with its data (the old lease)
        eq(wait_persistence(c, "ok").get("persistence"), "ok",
           "STATS persistence=ok when Redis is back")
        wait_in_sync(r, c, "the backlog drains to 0 and Redis matches "
                     "memory (the old lease released while down is gone)")
        p.stop()


def test_async_backlog_bound():
    with start_redis() as r:
        p = start_semd_redis(r, "--persistence", "async",
                             "--persistence-backlog", "10",
                             "--semaphore", "s", "1000")
        c = p.connect()
        stale = [expect_token(c, "ACQUIRE s LEASE 60000") for _ in range(3)]
        expect(c, "CREATE doomed 2", "OK")
        wait_in_sync(r, c, "in sync before the outage")
        r.kill()
        wait_down(c)
        worst = 0
        for t in stale:
            expect(c, "RELEASE s %d" % t, "OK")
        expect(c, "DELETE doomed", "OK")
        for i in range(40):
            token_of(c, "ACQUIRE s LEASE 60000")
            if i % 4 == 0:
                c.cmd("CREATE new%d %d" % (i, 1 + i))
            b = backlog(c)
            worst = max(worst, b if b is not None else 10 ** 9)
        ok(worst <= 10, "STATS persistence_backlog never exceeds "
           "--persistence-backlog 10 over 54 changes", "max seen %d" % worst)
        eq(c.info("s")["used"], "40", "grants went on while Redis was down")
        r.restart()                         # its data is now stale
        wait_in_sync(r, c, "when Redis is back it is rewritten from memory: "
                     "no stale grant or semaphore, every new one there",
                     timeout=30)
        if not ok(p.d.alive(), "semd is still running", "; ".join(
                ln.strip("# ") for ln in p.log_text().splitlines()
                if "ERROR:" in ln or "SUMMARY:" in ln) or
                log_tail(p.log_text(), 12)):
            return
        st = redis_state(r)
        top = max(holders(c, "s"))
        ok(st["tokens"] is not None and st["tokens"] >= top,
           "semd:tokens >= every token issued", repr(st["tokens"]))
        eq(r.cmd("EXISTS", "semd:{doomed}:sem"), 0,
           "the semaphore deleted while down is gone from Redis")
        p.stop()


run(test_async_order_and_kill9, test_async_backlog_drains,
    test_async_backlog_bound, time_limit=150)
