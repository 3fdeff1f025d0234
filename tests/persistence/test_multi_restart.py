#!/usr/bin/env python3
"""ACQUIREALL grants and request IDs across kill -9 (sync persistence):
a lease acquired with an ID whose reply was lost is answered the same
token by a retry after the restart; a multi-grant is written to every
semaphore's grants key at once and comes back whole (leased, or bound and
ATTACHed through any one of its semaphores); a grant one of whose parts
was deleted from Redis by hand comes back with the parts that are left,
which stay held (never over-granted). Every semd runs against a private
redis-server."""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403

GRACE_MS = 2000


def redis_grant(r, sem, token):
    """The decoded value of token in sem's grants key, or None."""
    return redis_state(r)["sems"].get(sem, {"grants": {}})["grants"].get(
        token)


def test_lost_reply_across_kill9():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "jobs", "2",
                             grace="%dms" % GRACE_MS)
        lost = p.connect()
        lost.send("ACQUIRE jobs LEASE 60000 ID req-7\r\n")
        lost.close()
        ok(wait_until(lambda: any(
            g.get("id") == "req-7" for g in
            redis_state(r)["sems"].get("jobs", {"grants": {}})[
                "grants"].values()), 10, 0.05),
           "the lease is written to Redis with its id, reply unread")
        p.restart()
        c = p.connect()
        t = is_token(c.cmd("ACQUIRE jobs LEASE 60000 ID req-7"),
                     "after kill -9 and restart, the retry: OK <token>")
        hs = holders(c, "jobs")
        eq(list(hs), [t], "HOLDERS shows one grant, with that token")
        eq(c.info("jobs")["used"], "1", "one permit, not two")
        eq(redis_grant(r, "jobs", t).get("id"), "req-7",
           "Redis: the grant under that token has the id")
        expect_err(c, "ACQUIRE jobs 2 LEASE 60000 ID req-7", "EXISTS",
                   "another n after the restart: EXISTS")
        p.stop()


def test_multi_survives_kill9():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "gpu", "2", "--semaphore",
                             "db", "3", grace="%dms" % GRACE_MS)
        a, b = p.connect(), p.connect()
        tl = expect_token(a, "ACQUIREALL gpu 1 db 2 LEASE 60000 ID job-1",
                          "a leased ACQUIREALL with an id")
        tb = expect_token(b, "ACQUIREALL db 1 gpu 1", "a bound ACQUIREALL")
        st = redis_state(r)
        gl, dl = st["sems"]["gpu"]["grants"], st["sems"]["db"]["grants"]
        eq((gl[tl]["n"], dl[tl]["n"], gl[tl].get("multi"),
            dl[tl].get("multi"), gl[tl].get("id")), (1, 2, 2, 2, "job-1"),
           "Redis (sync): a part in each semaphore's grants, each with its "
           "n, multi=2 and the id")
        eq((gl[tb]["n"], dl[tb]["n"], gl[tb]["kind"]), (1, 1, "conn"),
           "Redis: both parts of the bound grant")
        p.restart()
        loaded = loaded_line(p.log_text())
        ok(loaded is not None and loaded["grants"] == 2 and
           loaded["unowned"] == 1, "log: loaded 2 grants (1 unowned)",
           repr(loaded))
        c = p.connect()
        hg, hd = holders(c, "gpu"), holders(c, "db")
        eq(sorted(hg), sorted([tl, tb]), "HOLDERS gpu: both grants")
        eq(sorted(hd), sorted([tl, tb]), "HOLDERS db: both grants")
        eq((hg[tl]["n"], hd[tl]["n"], hg[tl].get("multi"),
            hd[tb].get("multi")), ("1", "2", "2", "2"),
           "each part with its n and multi=2")
        eq((c.info("gpu")["used"], c.info("db")["used"]), ("2", "3"),
           "used counts every part")
        expect(c, "ACQUIREALL db 2 gpu 1 LEASE 60000 ID job-1", "OK %d" % tl,
               "the id came back: a repeat is answered the lease's token")
        b2 = p.connect()
        expect(b2, "ATTACH gpu %d" % tb, "OK",
               "the bound grant is ATTACHed back through gpu")
        eq(holders(c, "db")[tb]["kind"], "conn", "and on db too")
        time.sleep(GRACE_MS / 1000.0 + 0.5)
        eq(sorted(holders(c, "db")), sorted([tl, tb]),
           "attached: kept past reclaim-grace on both")
        expect(b2, "RELEASE db %d" % tb, "OK", "RELEASE through db")
        expect(c, "RELEASE gpu %d" % tl, "OK", "RELEASE the lease via gpu")
        eq((c.info("gpu")["used"], c.info("db")["used"]), ("0", "0"),
           "all free")
        ok(wait_until(lambda: redis_tokens(r, "gpu") == [] and
                      redis_tokens(r, "db") == [], 10, 0.05),
           "Redis: every part deleted")
        p.stop()


def test_unattached_multi_released_whole():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "a", "1", "--semaphore", "b",
                             "1", grace="%dms" % GRACE_MS)
        c = p.connect()
        t = expect_token(c, "ACQUIREALL a 1 b 1")
        p.restart()
        x = p.connect()
        eq((x.info("a")["used"], x.info("b")["used"]), ("1", "1"),
           "unowned after the restart, on both")
        w = p.connect()
        w.send("ACQUIREALL b 1 a 1 TIMEOUT 20000\r\n")
        ok(wait_until(lambda: x.info("a")["waiters"] == "1"), "a waiter")
        got = w.line(20)
        ok(got.startswith("OK ") and int(got.split()[1]) > t,
           "not attached within reclaim-grace: released whole, the waiter "
           "granted with a larger token", got)
        p.stop()


def test_damaged_multi_keeps_parts():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "a", "1", "--semaphore", "b",
                             "1", grace="%dms" % GRACE_MS)
        c = p.connect()
        t = expect_token(c, "ACQUIREALL a 1 b 1 LEASE 60000")
        p.kill9()
        eq(r.cmd("HDEL", "semd:{b}:grants", str(t)), 1,
           "(the test deletes the b part from Redis by hand)")
        p.start()
        x = p.connect()
        ok("only 1 of its parts were found" in p.log_text(),
           "the log says the grant lost a part")
        eq((x.info("a")["used"], x.info("b")["used"]), ("1", "0"),
           "the part left on a stays held; b is free")
        expect(x, "TRY a", "TIMEOUT", "a is not granted twice")
        tb = expect_token(x, "TRY b")
        expect(x, "RELEASE a %d" % t, "OK", "the damaged grant is released")
        expect(x, "RELEASE b %d" % tb, "OK")
        ok(wait_until(lambda: redis_tokens(r, "a") == [], 10, 0.05),
           "and its part deleted from Redis")
        p.stop()


run(test_lost_reply_across_kill9, test_multi_survives_kill9,
    test_unattached_multi_released_whole, test_damaged_multi_keeps_parts,
    time_limit=180)
