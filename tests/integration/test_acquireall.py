#!/usr/bin/env python3
"""ACQUIREALL over TCP (PROTOCOL 1.1 "Atomic acquire of several
semaphores"): all or nothing, one FIFO across the queues (no deadlock
between A-then-B and B-then-A), the order of errors (PROTO, then NOSEM,
then RANGE), the whole grant through any of its semaphores, HOLDERS and
WAITERS with multi=, DELETE BUSY."""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F403


def waiters(ctl, sem, k):
    return wait_until(lambda: ctl.info(sem)["waiters"] == str(k))


def test_grant_and_listings():
    with start_semd("--semaphore", "gpu", "2", "--semaphore", "db", "3") \
            as d:
        c = d.connect()
        t = expect_token(c, "ACQUIREALL gpu 1 db 2",
                         "ACQUIREALL gpu 1 db 2 -> OK <token>")
        expect(c, "INFO gpu", "OK name=gpu capacity=2 used=1 available=1 "
               "holders=1 waiters=0", "gpu: 1 used by the grant")
        expect(c, "INFO db", "OK name=db capacity=3 used=2 available=1 "
               "holders=1 waiters=0", "db: 2 used by the same grant")
        hg = c.listing("HOLDERS gpu")
        hd = c.listing("HOLDERS db")
        eq([(h["token"], h["n"], h.get("multi")) for h in hg],
           [(str(t), "1", "2")], "HOLDERS gpu: the token, its n, multi=2")
        eq([(h["token"], h["n"], h.get("multi")) for h in hd],
           [(str(t), "2", "2")], "HOLDERS db: the token, its n, multi=2")
        eq(hg[0]["kind"], "conn", "bound to its connection")
        expect(c, "CHECK db %d" % t, "OK n=2 kind=conn ttl_ms=-",
               "CHECK shows that semaphore's n")
        expect(c, "CHECK gpu %d" % t, "OK n=1 kind=conn ttl_ms=-")
        # A single grant has no multi= key.
        t1 = expect_token(c, "ACQUIRE gpu")
        ok("multi" not in c.listing("HOLDERS gpu")[1],
           "a single grant's HOLDERS line has no multi=")
        expect(c, "RELEASE gpu %d" % t1, "OK")
        # Released through either semaphore, whole.
        other = d.connect()
        expect_err(other, "RELEASE db %d" % t, "NOTOWNER",
                   "another connection may not release a bound grant")
        expect(c, "RELEASE db %d" % t, "OK", "RELEASE through db")
        expect_err(c, "RELEASE gpu %d" % t, "NOTHELD",
                   "the gpu part went with it")
        eq((c.info("gpu")["used"], c.info("db")["used"]), ("0", "0"),
           "nothing held on either")
        # Closing the connection releases the whole grant.
        t = expect_token(other, "ACQUIREALL gpu 2 db 3")
        other.close()
        ok(wait_until(lambda: c.info("gpu")["used"] == "0" and
                      c.info("db")["used"] == "0"),
           "closing its connection frees both")


def test_all_or_nothing():
    with start_semd("--semaphore", "a", "1", "--semaphore", "b", "1") as d:
        c, w = d.connect(), d.connect()
        tb = expect_token(c, "ACQUIRE b")
        expect(w, "ACQUIREALL a 1 b 1 TIMEOUT 0", "TIMEOUT",
               "b is held: TIMEOUT 0 answers TIMEOUT")
        eq(c.info("a")["used"], "0", "and a was not taken")
        w.send("ACQUIREALL a 1 b 1 TIMEOUT 10000\r\n")
        ok(waiters(c, "a", 1) and waiters(c, "b", 1),
           "it waits on both queues")
        eq(c.info("a")["used"], "0", "nothing is held while it waits")
        wl = c.listing("WAITERS a")
        eq([(x["n"], x.get("multi")) for x in wl], [("1", "2")],
           "WAITERS a shows it with multi=2")
        expect(c, "TRY a", "TIMEOUT",
               "a has room, but the multi-waiter at its head blocks a TRY")
        expect(c, "RELEASE b %d" % tb, "OK")
        t = is_token(w.line(10), "granted once b is free")
        eq((c.info("a")["used"], c.info("b")["used"]), ("1", "1"),
           "it holds both")
        expect(w, "RELEASE a %d" % t, "OK")


def test_no_deadlock_crossed_order():
    """Two clients in a loop: A then B against B then A, capacity 1.
    Whichever is granted releases at once; the other must follow."""
    with start_semd("--semaphore", "a", "1", "--semaphore", "b", "1") as d:
        x, y = d.connect(), d.connect()
        rounds, done = 200, 0
        for _ in range(rounds):
            x.send("ACQUIREALL a 1 b 1 TIMEOUT 10000\r\n")
            y.send("ACQUIREALL b 1 a 1 TIMEOUT 10000\r\n")
            pending = {x: "b", y: "a"}
            deadline = time.monotonic() + 20
            while pending and time.monotonic() < deadline:
                for conn in list(pending):
                    got = conn.try_line(0.01)
                    if got is None:
                        continue
                    if not got.startswith("OK "):
                        deadline = 0
                        break
                    conn.send("RELEASE %s %s\r\n" % (pending.pop(conn),
                                                     got.split()[1]))
                    if conn.line(10) != "OK":
                        deadline = 0
                        break
            if pending:
                break
            done += 1
        eq(done, rounds, "%d rounds of crossed ACQUIREALLs, no deadlock, "
           "no TIMEOUT" % rounds)


def test_errors_in_order():
    with start_semd("--semaphore", "a", "2", "--semaphore", "b", "1") as d:
        c = d.connect()
        expect_err(c, "ACQUIREALL a 1", "PROTO", "one semaphore: PROTO")
        expect_err(c, "ACQUIREALL a 1 a 1", "PROTO", "a name twice: PROTO")
        expect_err(c, "ACQUIREALL a b 1", "PROTO", "a missing n: PROTO")
        expect_err(c, "ACQUIREALL a 1 b", "PROTO", "a missing last n")
        expect_err(c, "ACQUIREALL a 1 b 1 ID x", "PROTO",
                   "ID without LEASE: PROTO")
        many = " ".join("s%d 1" % i for i in range(17))
        expect_err(c, "ACQUIREALL " + many, "PROTO", "17 semaphores: PROTO")
        # PROTO before NOSEM, NOSEM before RANGE.
        expect_err(c, "ACQUIREALL nope 1 nope 1", "PROTO",
                   "unknown and twice: PROTO first")
        expect_err(c, "ACQUIREALL a 9 nope 1", "NOSEM",
                   "unknown name and too big n: NOSEM first")
        expect_err(c, "ACQUIREALL nope 1 a 1", "NOSEM", "unknown first name")
        expect_err(c, "ACQUIREALL a 1 b 2", "RANGE",
                   "n above b's capacity: RANGE")
        # Keywords in name position start the options.
        expect_err(c, "ACQUIREALL a 1 TIMEOUT 5 b 1", "PROTO",
                   "a name after the options: PROTO")
        eq(c.info("a")["used"], "0", "no error took anything")
        # 16 semaphores is fine.
        for i in range(16):
            expect(c, "CREATE m%d 1" % i, "OK")
        all16 = " ".join("m%d 1" % i for i in range(16))
        t = expect_token(c, "ACQUIREALL %s LEASE 60000" % all16,
                         "16 semaphores, leased")
        eq(c.listing("HOLDERS m15")[0].get("multi"), "16", "multi=16")
        expect(c, "RELEASE m7 %d" % t, "OK")
        eq(c.info("m0")["used"], "0", "released whole")


def test_whole_grant_ops_and_delete():
    with start_semd("--semaphore", "a", "1", "--semaphore", "b", "1") as d:
        c, w, ctl = d.connect(), d.connect(), d.connect()
        t = expect_token(c, "ACQUIREALL a 1 b 1 LEASE 60000")
        expect(c, "REFRESH b %d 30000" % t, "OK 30000", "REFRESH through b")
        ttl = int(c.listing("HOLDERS a")[0]["ttl_ms"])
        ok(25000 < ttl <= 30000, "the a part's lease was refreshed too",
           str(ttl))
        expect_err(ctl, "DELETE a", "BUSY", "DELETE of a held part: BUSY")
        w.send("WATCH a %d\r\n" % t)
        ok(w.no_reply(0.2), "WATCH through a blocks")
        expect(ctl, "REVOKE b %d" % t, "OK", "REVOKE through b")
        eq(w.line(10), "OK revoked", "the watcher of a learns it")
        eq((ctl.info("a")["used"], ctl.info("b")["used"]), ("0", "0"),
           "both freed")
        # A multi-waiter makes DELETE BUSY too.
        tb = expect_token(ctl, "ACQUIRE b")
        c.send("ACQUIREALL a 1 b 1\r\n")
        ok(waiters(ctl, "a", 1), "waits on a and b")
        expect_err(ctl, "DELETE a", "BUSY",
                   "DELETE of a semaphore a multi-waiter waits on: BUSY")
        expect(ctl, "RELEASE b %d" % tb, "OK")
        t = is_token(c.line(10), "granted")
        expect(c, "RELEASE a %d" % t, "OK")
        expect(ctl, "DELETE a", "OK", "DELETE once free")


run(test_grant_and_listings, test_all_or_nothing,
    test_no_deadlock_crossed_order, test_errors_in_order,
    test_whole_grant_ops_and_delete, time_limit=120)
