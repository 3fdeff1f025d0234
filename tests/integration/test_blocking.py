#!/usr/bin/env python3
"""Blocking ACQUIRE: it holds back its own connection only; TIMEOUT;
disconnects release bound permits and drop waiters; leases survive."""
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F403


def waiters(c, sem):
    return int(c.info(sem)["waiters"])


def test_holds_back_own_connection_only():
    with start_semd("--semaphore", "s", "1") as d:
        h = d.connect()
        b = d.connect()
        o = d.connect()
        th = expect_token(h, "ACQUIRE s")
        b.send("ACQUIRE s\r\nPING\r\nCREATE later 1\r\nINFO s\r\n")
        ok(wait_until(lambda: waiters(o, "s") == 1), "b's ACQUIRE waits")
        ok(b.no_reply(0.5),
           "nothing is answered on b while its ACQUIRE waits")
        expect(o, "PING", "OK PONG", "another connection is served at once")
        expect_err(o, "INFO later", "NOSEM",
                   "requests pipelined behind the wait are not executed")
        eq([r.get("name") for r in o.listing("LIST")], ["s"],
           "LIST shows no 'later' yet")
        for i in range(50):
            if o.cmd("PING") != "OK PONG":
                ok(False, "50 PINGs on another connection")
                break
        else:
            ok(True, "50 PINGs on another connection while b waits")
        expect(h, "RELEASE s %d" % th, "OK")
        got = b.lines(4, timeout=10)
        match(got[0], r"OK [0-9]+", "b's ACQUIRE granted after RELEASE")
        eq([info_v1(x) for x in got[1:]], ["OK PONG", "OK", "OK name=s capacity=1 used=1 "
                     "available=0 holders=1 waiters=0"],
           "then the held-back requests run, in order")
        expect(o, "INFO later", "OK name=later capacity=1 used=0 "
               "available=1 holders=0 waiters=0",
               "the held-back CREATE ran after the grant")


def test_acquire_timeout():
    with start_semd("--semaphore", "s", "1") as d:
        h = d.connect()
        b = d.connect()
        expect_token(h, "ACQUIRE s")
        t0 = int(h.stats().get("timeouts", "0") or 0)
        b.send("ACQUIRE s TIMEOUT 300\r\nPING\r\n")
        eq(b.line(10), "TIMEOUT", "ACQUIRE s TIMEOUT 300 on a full sem -> "
           "TIMEOUT")
        eq(b.line(5), "OK PONG", "the pipelined PING then runs")
        expect(h, "INFO s", "OK name=s capacity=1 used=1 available=0 "
               "holders=1 waiters=0", "the timed-out waiter left the queue")
        eq(h.stats().get("timeouts"), str(t0 + 1), "STATS timeouts + 1")
        b.send("ACQUIRE s 1 TIMEOUT 200 LEASE 1000\r\n")
        eq(b.line(10), "TIMEOUT", "TIMEOUT with LEASE also times out")
        expect(b, "PING", "OK PONG", "the connection stays usable")


def test_timeout_granted_before_expiry():
    with start_semd("--semaphore", "s", "1") as d:
        h = d.connect()
        b = d.connect()
        th = expect_token(h, "ACQUIRE s")
        b.send("ACQUIRE s TIMEOUT 30000\r\n")
        ok(wait_until(lambda: waiters(h, "s") == 1), "b waits")
        expect(h, "RELEASE s %d" % th, "OK")
        is_token(b.line(10), "a waiter with a TIMEOUT is granted on release")


def test_disconnect_releases_and_drops():
    with start_semd("--semaphore", "d", "5", "--semaphore", "w", "1") as d:
        ctl = d.connect()
        a = connect(d.port)
        expect_token(a, "ACQUIRE d 2")
        tl = expect_token(a, "ACQUIRE d 1 LEASE 60000")
        expect_token(ctl, "ACQUIRE w")
        a.send("ACQUIRE w\r\n")
        ok(wait_until(lambda: waiters(ctl, "w") == 1), "a waits on w")
        expect(ctl, "INFO d", "OK name=d capacity=5 used=3 available=2 "
               "holders=2 waiters=0")
        a.close()
        ok(wait_until(lambda: ctl.info("d")["used"] == "1"),
           "closing the connection released its bound permits",
           repr(ctl.info("d")))
        ok(wait_until(lambda: waiters(ctl, "w") == 0),
           "closing the connection dropped its waiter")
        hs = ctl.listing("HOLDERS d")
        eq([(x.get("token"), x.get("kind")) for x in hs],
           [(str(tl), "lease")], "the lease survives its connection")
        expect(ctl, "INFO w", "OK name=w capacity=1 used=1 available=0 "
               "holders=1 waiters=0", "other holders are unaffected")
        expect(ctl, "RELEASE d %d" % tl, "OK",
               "another connection releases the orphaned lease")


def test_waiter_leaving_reexamines_queue():
    with start_semd("--semaphore", "x", "2") as d:
        ctl = d.connect()
        a = connect(d.port)
        b = d.connect()
        expect_token(ctl, "ACQUIRE x")
        a.send("ACQUIRE x 2\r\n")
        ok(wait_until(lambda: waiters(ctl, "x") == 1), "a (n=2) waits")
        b.send("ACQUIRE x 1\r\n")
        ok(wait_until(lambda: waiters(ctl, "x") == 2),
           "b (n=1) queues behind a although 1 is available")
        ok(b.no_reply(0.3), "b is not granted while a heads the queue")
        a.close()
        is_token(b.line(10), "a's disconnect lets b in at once")
        expect(ctl, "INFO x", "OK name=x capacity=2 used=2 available=0 "
               "holders=2 waiters=0")


def test_quit_behind_wait():
    with start_semd("--semaphore", "s", "1") as d:
        h = d.connect()
        b = connect(d.port)
        th = expect_token(h, "ACQUIRE s")
        b.send("ACQUIRE s\r\nQUIT\r\nPING\r\n")
        ok(wait_until(lambda: waiters(h, "s") == 1), "b waits")
        ok(b.no_reply(0.3), "QUIT behind a waiting ACQUIRE is held back")
        expect(h, "RELEASE s %d" % th, "OK")
        got = []
        try:
            got = b.lines(2, timeout=10)
        except Exception as e:
            got.append("<%s>" % e)
        ok(len(got) == 2 and re.fullmatch(r"OK [0-9]+", got[0]) and
           got[1] == "OK", "grant, then QUIT's OK", repr(got))
        ok(b.expect_closed(5), "then the connection is closed")
        ok(wait_until(lambda: h.info("s")["used"] == "0"),
           "and its permit is released")
        b.close()


def test_many_blocked():
    with start_semd("--semaphore", "s", "1") as d:
        h = d.connect()
        th = expect_token(h, "ACQUIRE s")
        ws = [d.connect() for _ in range(20)]
        for i, w in enumerate(ws):
            w.send("ACQUIRE s\r\nPING\r\n")
            wait_until(lambda: waiters(h, "s") == i + 1)
        eq(waiters(h, "s"), 20, "20 connections wait")
        o = d.connect()
        expect(o, "PING", "OK PONG", "a 22nd connection is not held back")
        tok = th
        for i, w in enumerate(ws):
            prev = ws[i - 1] if i else h
            r = prev.cmd("RELEASE s %d" % tok)
            if r != "OK":
                ok(False, "each holder releases in turn",
                   "RELEASE s %d -> %r" % (tok, r))
                break
            r = w.line(10)
            m = re.fullmatch(r"OK ([0-9]+)", r)
            if not m:
                ok(False, "waiters granted one by one in FIFO order",
                   "waiter %d got %r" % (i, r))
                break
            tok = int(m.group(1))
            if w.line(5) != "OK PONG":
                ok(False, "each waiter's PING follows its grant")
                break
            if i + 1 < len(ws) and not ws[i + 1].no_reply(0.01):
                ok(False, "the next waiter is still waiting")
                break
        else:
            ok(True, "20 waiters granted one by one in FIFO order")


if __name__ == "__main__":
    run(test_holds_back_own_connection_only, test_acquire_timeout,
        test_timeout_granted_before_expiry, test_disconnect_releases_and_drops,
        test_waiter_leaving_reexamines_queue, test_quit_behind_wait,
        test_many_blocked)
