#!/usr/bin/env python3
"""FIFO and weights across connections (Go's semaphore.Weighted): a big
request at the head blocks smaller ones behind it; when the head leaves
(timeout), the ones behind are let in at once."""
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F403


def queue(ctl, sem, req, conn, k):
    """conn sends req; wait until sem has k waiters."""
    conn.send(req + "\r\n")
    return ok(wait_until(lambda: ctl.info(sem)["waiters"] == str(k)),
              "%s queues as waiter %d" % (show(req), k))


def token(line, desc):
    return is_token(line, desc) or 0


def test_fifo_three_connections():
    with start_semd("--semaphore", "f", "1") as d:
        ctl = d.connect()
        a, b, c = d.connect(), d.connect(), d.connect()
        t0 = expect_token(ctl, "ACQUIRE f")
        queue(ctl, "f", "ACQUIRE f", a, 1)
        queue(ctl, "f", "ACQUIRE f", b, 2)
        queue(ctl, "f", "ACQUIRE f", c, 3)
        ws = ctl.listing("WAITERS f")
        eq([w.get("n") for w in ws], ["1", "1", "1"], "WAITERS: 3 waiters")
        expect(ctl, "RELEASE f %d" % t0, "OK")
        ta = token(a.line(10), "first in queue (a) granted first")
        ok(b.no_reply(0.3) and c.no_reply(0.05), "b and c still wait")
        eq([w.get("owner") for w in ctl.listing("WAITERS f")],
           [w.get("owner") for w in ws[1:]], "WAITERS: b then c")
        expect(a, "RELEASE f %d" % ta, "OK")
        tb = token(b.line(10), "second (b) granted next")
        ok(c.no_reply(0.3), "c still waits")
        expect(b, "RELEASE f %d" % tb, "OK")
        tc = token(c.line(10), "third (c) granted last")
        ok(t0 < ta < tb < tc, "tokens increase in grant order",
           repr((t0, ta, tb, tc)))


def test_big_head_blocks_smaller():
    with start_semd("--semaphore", "f", "3") as d:
        ctl = d.connect()
        a, b, c = d.connect(), d.connect(), d.connect()
        t0 = expect_token(ctl, "ACQUIRE f 2")
        queue(ctl, "f", "ACQUIRE f 3", a, 1)
        queue(ctl, "f", "ACQUIRE f 1", b, 2)
        queue(ctl, "f", "ACQUIRE f 1", c, 3)
        ok(b.no_reply(0.3) and c.no_reply(0.05),
           "small requests wait behind the big head although 1 unit is "
           "available")
        expect(ctl, "TRY f", "TIMEOUT",
               "TRY f 1 with 1 available but waiters queued -> TIMEOUT")
        expect(ctl, "ACQUIRE f 1 TIMEOUT 0", "TIMEOUT",
               "ACQUIRE TIMEOUT 0 likewise -> TIMEOUT")
        eq([w.get("n") for w in ctl.listing("WAITERS f")], ["3", "1", "1"],
           "WAITERS in queue order: n=3, n=1, n=1")
        expect(ctl, "INFO f", "OK name=f capacity=3 used=2 available=1 "
               "holders=1 waiters=3")
        expect(ctl, "RELEASE f %d" % t0, "OK")
        ta = token(a.line(10), "the big head (n=3) is granted first")
        ok(b.no_reply(0.3) and c.no_reply(0.05), "b and c still wait")
        expect(a, "RELEASE f %d" % ta, "OK")
        token(b.line(10), "then b (n=1)")
        token(c.line(10), "and c (n=1) together")
        expect(ctl, "INFO f", "OK name=f capacity=3 used=2 available=1 "
               "holders=2 waiters=0")


def test_head_timeout_lets_others_in():
    with start_semd("--semaphore", "f", "3") as d:
        ctl = d.connect()
        a, b, c = d.connect(), d.connect(), d.connect()
        t0 = expect_token(ctl, "ACQUIRE f 2")
        queue(ctl, "f", "ACQUIRE f 3 TIMEOUT 2000", a, 1)
        queue(ctl, "f", "ACQUIRE f 1", b, 2)
        queue(ctl, "f", "ACQUIRE f 1", c, 3)
        ok(b.no_reply(0.2), "b waits behind the head")
        eq(a.line(15), "TIMEOUT", "the head's TIMEOUT expires")
        token(b.line(10), "the head's timeout lets b in at once (no "
              "release needed)")
        ok(c.no_reply(0.3), "c waits: nothing left after b")
        eq([w.get("n") for w in ctl.listing("WAITERS f")], ["1"],
           "WAITERS: only c")
        expect(ctl, "RELEASE f %d" % t0, "OK")
        token(c.line(10), "c granted on release")


def test_one_release_grants_several():
    with start_semd("--semaphore", "f", "4") as d:
        ctl = d.connect()
        ws = [d.connect() for _ in range(4)]
        t0 = expect_token(ctl, "ACQUIRE f 4")
        for i, n in enumerate((1, 2, 1, 3)):
            queue(ctl, "f", "ACQUIRE f %d" % n, ws[i], i + 1)
        expect(ctl, "RELEASE f %d" % t0, "OK")
        for i in range(3):
            token(ws[i].line(10), "waiter %d granted by one release" % (i + 1))
        ok(ws[3].no_reply(0.3), "the 4th (n=3) waits: only 0 left")
        expect(ctl, "INFO f", "OK name=f capacity=4 used=4 available=0 "
               "holders=3 waiters=1")


def test_resize_respects_fifo():
    with start_semd("--semaphore", "f", "2") as d:
        ctl = d.connect()
        a, b = d.connect(), d.connect()
        expect_token(ctl, "ACQUIRE f 2")
        queue(ctl, "f", "ACQUIRE f 2", a, 1)
        queue(ctl, "f", "ACQUIRE f 1", b, 2)
        expect(ctl, "RESIZE f 3", "OK")
        ok(a.no_reply(0.3) and b.no_reply(0.05),
           "RESIZE to 3: 1 available, the head needs 2, b stays behind it")
        expect(ctl, "RESIZE f 4", "OK")
        token(a.line(10), "RESIZE to 4 grants the head")
        ok(b.no_reply(0.3), "b still waits (used 4 of 4)")
        expect(ctl, "RESIZE f 5", "OK")
        token(b.line(10), "RESIZE to 5 grants b")


def test_lease_expiry_grants_waiter():
    with start_semd("--semaphore", "f", "1") as d:
        ctl = d.connect()
        b = d.connect()
        expect_token(ctl, "ACQUIRE f LEASE 300")
        b.send("ACQUIRE f\r\n")
        token(b.line(10), "a lease running out lets the waiter in")


if __name__ == "__main__":
    run(test_fifo_three_connections, test_big_head_blocks_smaller,
        test_head_timeout_lets_others_in, test_one_release_grants_several,
        test_resize_respects_fifo, test_lease_expiry_grants_waiter)
