#!/usr/bin/env python3
"""Leases: they run out by themselves, REFRESH extends them, anyone with
the token may use them, they outlive their connection, and they start
when granted. Times are polled with generous deadlines, never asserted
to be fast."""
import os
import re
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F403


def ttl_of(reply):
    m = re.fullmatch(r"OK n=[0-9]+ kind=lease ttl_ms=([0-9]+)", reply)
    return int(m.group(1)) if m else None


def test_lease_expires():
    with start_semd("--semaphore", "l", "2") as d:
        c = d.connect()
        e0 = int(c.stats().get("expired", "0") or 0)
        t = expect_token(c, "ACQUIRE l LEASE 200")
        r = c.cmd("CHECK l %d" % t)
        ttl = ttl_of(r)
        ok(ttl is not None and ttl <= 200 or r.startswith("ERR NOTHELD"),
           "CHECK right after: kind=lease, ttl_ms <= 200 (or already "
           "expired on a slow machine)", repr(r))
        ok(wait_until(lambda: c.info("l")["used"] == "0", 10),
           "LEASE 200: INFO shows used=0 once it ran out")
        expect(c, "INFO l", "OK name=l capacity=2 used=0 available=2 "
               "holders=0 waiters=0")
        expect_err(c, "CHECK l %d" % t, "NOTHELD",
                   "CHECK of an expired lease -> ERR NOTHELD")
        expect_err(c, "REFRESH l %d 1000" % t, "NOTHELD",
                   "REFRESH of an expired lease -> ERR NOTHELD")
        expect_err(c, "RELEASE l %d" % t, "NOTHELD",
                   "RELEASE of an expired lease -> ERR NOTHELD")
        eq(c.stats().get("expired"), str(e0 + 1), "STATS expired + 1")


def test_lease_zero():
    with start_semd("--semaphore", "l", "1") as d:
        c = d.connect()
        expect_token(c, "ACQUIRE l LEASE 0", "LEASE 0 -> OK <token>")
        ok(wait_until(lambda: c.info("l")["used"] == "0", 10),
           "LEASE 0 ends at once")
        expect_token(c, "TRY l LEASE 0", "TRY l LEASE 0 -> OK <token>")
        ok(wait_until(lambda: c.info("l")["used"] == "0", 10),
           "TRY ... LEASE 0 ends at once too")


def test_refresh():
    with start_semd("--semaphore", "l", "3") as d:
        a = d.connect()
        b = d.connect()
        t = expect_token(a, "ACQUIRE l LEASE 1500")
        expect(a, "REFRESH l %d 60000" % t, "OK 60000",
               "REFRESH l <token> 60000 -> OK 60000")
        ttl = ttl_of(a.cmd("CHECK l %d" % t))
        ok(ttl is not None and 1500 < ttl <= 60000,
           "after REFRESH, CHECK's ttl_ms is about 60000", repr(ttl))
        time.sleep(2.5)
        ok(ttl_of(a.cmd("CHECK l %d" % t)) is not None,
           "the refreshed lease outlives its first 1500 ms")
        expect(b, "REFRESH l %d 30000" % t, "OK 30000",
               "anyone with the token may REFRESH")
        ttl = ttl_of(b.cmd("CHECK l %d" % t))
        ok(ttl is not None and ttl <= 30000,
           "REFRESH can shorten: ttl_ms <= 30000", repr(ttl))
        hs = a.listing("HOLDERS l")
        ok(len(hs) == 1 and hs[0].get("kind") == "lease" and
           hs[0].get("ttl_ms", "x").isdigit() and
           int(hs[0]["ttl_ms"]) <= 30000,
           "HOLDERS shows the lease's ttl_ms", repr(hs))
        tb = expect_token(a, "ACQUIRE l")
        expect_err(a, "REFRESH l %d 1000" % tb, "NOTLEASE",
                   "REFRESH of a bound permit -> ERR NOTLEASE")
        expect_err(a, "REFRESH l 987654 1000", "NOTHELD",
                   "REFRESH of an unknown token -> ERR NOTHELD")
        for req in ("REFRESH l %d" % t, "REFRESH l %d -5" % t,
                    "REFRESH l %d 2147483648" % t, "REFRESH l %d x" % t,
                    "REFRESH l x 100", "REFRESH l", "REFRESH",
                    "REFRESH l %d 100 100" % t):
            expect_err(a, req, "PROTO")
        expect(a, "REFRESH l %d 2147483647" % t, "OK 2147483647",
               "REFRESH to 2^31-1 ms")
        expect(a, "REFRESH l %d 0" % t, "OK 0", "REFRESH to 0 ms -> OK 0")
        ok(wait_until(lambda: a.info("l")["used"] == "1", 10),
           "...and the lease ends at once")
        expect_err(a, "CHECK l %d" % t, "NOTHELD")


def test_lease_survives_disconnect():
    with start_semd("--semaphore", "l", "2") as d:
        a = connect(d.port)
        o = d.connect()
        t = expect_token(a, "ACQUIRE l LEASE 60000")
        tb = expect_token(a, "ACQUIRE l")
        a.close()
        ok(wait_until(lambda: o.info("l")["used"] == "1", 10),
           "the bound permit goes with its connection")
        time.sleep(0.3)
        eq(o.info("l")["used"], "1", "the lease stays after its "
           "connection closed")
        match(o.cmd("CHECK l %d" % t), r"OK n=1 kind=lease ttl_ms=[0-9]+",
              "CHECK of the orphaned lease")
        expect_err(o, "CHECK l %d" % tb, "NOTHELD",
                   "the bound one is gone")
        hs = o.listing("HOLDERS l")
        eq([(h.get("token"), h.get("owner")) for h in hs], [(str(t), "-")],
           "HOLDERS: the orphaned lease has owner=-")
        expect(o, "REFRESH l %d 60000" % t, "OK 60000",
               "another connection refreshes it")
        expect(o, "RELEASE l %d" % t, "OK",
               "another connection releases it")


def test_lease_starts_when_granted():
    with start_semd("--semaphore", "l", "1") as d:
        h = d.connect()
        b = d.connect()
        th = expect_token(h, "ACQUIRE l")
        b.send("ACQUIRE l TIMEOUT 30000 LEASE 2000\r\n")
        ok(wait_until(lambda: h.info("l")["waiters"] == "1"), "b waits")
        time.sleep(3.0)            # longer than the lease
        expect(h, "RELEASE l %d" % th, "OK")
        tb = is_token(b.line(10), "b is granted on release")
        r = b.cmd("CHECK l %d" % (tb or 0))
        ttl = ttl_of(r)
        ok(ttl is not None and ttl <= 2000,
           "the lease runs from the grant, not from the queueing",
           repr(r))
        ok(wait_until(lambda: h.info("l")["used"] == "0", 10),
           "and it runs out later")


def test_lease_and_bound_mixed():
    with start_semd("--semaphore", "m", "3") as d:
        a = d.connect()
        b = d.connect()
        tl = expect_token(a, "ACQUIRE m 2 LEASE 300")
        tc = expect_token(a, "ACQUIRE m 1")
        b.send("ACQUIRE m 2\r\n")
        tb = is_token(b.line(10), "a waiter (n=2) is granted when the "
                      "n=2 lease runs out")
        expect_err(a, "RELEASE m %d" % tl, "NOTHELD")
        expect(a, "CHECK m %d" % tc, "OK n=1 kind=conn ttl_ms=-",
               "the bound permit is untouched")
        expect(b, "RELEASE m %d" % (tb or 0), "OK")


if __name__ == "__main__":
    run(test_lease_expires, test_lease_zero, test_refresh,
        test_lease_survives_disconnect, test_lease_starts_when_granted,
        test_lease_and_bound_mixed)
