#!/usr/bin/env python3
"""WATCH <sem> <token> [TIMEOUT <ms>] (protocol 1.1): blocks until the
grant ends, then OK <reason> for every way a grant ends (released,
expired, revoked, closed by a peer close or KILL, unclaimed after a
restart); several watchers per grant; TIMEOUT; ERR NOTHELD and NOSEM;
replies stay in order; a watcher that goes away is dropped cleanly."""
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403


def restart_when_free(p, r):
    """kill -9 semd, wait until its ownership of the data set has run out
    (the owner key, if this semd keeps one, expires), start it again."""
    p.kill9()
    ok(wait_until(lambda: r.cmd("EXISTS", "semd:owner") == 0, 20),
       "the killed semd's ownership runs out")
    p.restarts += 1
    return p.start()


def conn_id(asker, c):
    """The id of connection c, from CLIENTS asked on asker."""
    host, port = c.sock.getsockname()[:2]
    for r in asker.listing("CLIENTS"):
        if r["addr"] == "%s:%d" % (host, port):
            return int(r["id"])
    raise AssertionError("no CLIENTS line for connection %s:%d" %
                         (host, port))


def watch(d, sem, token, extra=""):
    """A new connection that sends WATCH and is checked to be blocked."""
    w = d.connect()
    w.send("WATCH %s %d%s\r\n" % (sem, token, extra))
    ok(w.no_reply(0.3), "WATCH %s %d%s blocks while the grant is held" %
       (sem, token, extra))
    return w


def test_released():
    with start_semd("--semaphore", "s", "2") as d:
        a = d.connect()
        t = expect_token(a, "ACQUIRE s")
        w = watch(d, "s", t)
        expect(a, "RELEASE s %d" % t, "OK")
        eq(w.line(), "OK released", "RELEASE -> the watcher gets OK released")
        # A lease released by someone else.
        tl = expect_token(a, "ACQUIRE s LEASE 60000")
        w = watch(d, "s", tl)
        o = d.connect()
        expect(o, "RELEASE s %d" % tl, "OK")
        eq(w.line(), "OK released", "a lease released by another "
           "connection -> OK released")
        expect(w, "PING", "OK PONG", "the watcher takes requests again")


def test_expired():
    with start_semd("--semaphore", "s", "1") as d:
        a = d.connect()
        t = expect_token(a, "ACQUIRE s LEASE 400")
        w = watch(d, "s", t)
        t0 = time.monotonic()
        eq(w.line(timeout=10), "OK expired", "a lease that runs out -> OK "
           "expired")
        ok(time.monotonic() - t0 < 5, "...when it runs out, not later")


def test_revoked():
    with start_semd("--semaphore", "s", "2") as d:
        a = d.connect()
        o = d.connect()
        t = expect_token(a, "ACQUIRE s")
        tl = expect_token(a, "ACQUIRE s LEASE 60000")
        w = watch(d, "s", t)
        wl = watch(d, "s", tl)
        expect(o, "REVOKE s %d" % t, "OK")
        eq(w.line(), "OK revoked", "REVOKE of a bound grant -> OK revoked")
        ok(wl.no_reply(0.2), "the other grant's watcher still waits")
        expect(o, "REVOKE s %d" % tl, "OK")
        eq(wl.line(), "OK revoked", "REVOKE of a lease -> OK revoked")


def test_closed():
    with start_semd("--semaphore", "s", "2") as d:
        a = d.connect()
        t = expect_token(a, "ACQUIRE s")
        w = watch(d, "s", t)
        a.close()
        eq(w.line(), "OK closed", "the holder's connection closes -> OK "
           "closed")
        b = d.connect()
        k = d.connect()
        tb = expect_token(b, "ACQUIRE s")
        w = watch(d, "s", tb)
        expect(k, "KILL %d" % conn_id(k, b), "OK")
        eq(w.line(), "OK closed", "the holder's connection is KILLed -> OK "
           "closed")


def test_unclaimed():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "s", "2", grace="3s")
        a = p.connect()
        t = expect_token(a, "ACQUIRE s")
        restart_when_free(p, r)
        c = p.connect()
        eq(holders(c, "s")[t]["owner"], "-", "after the restart the bound "
           "grant is unowned")
        w = p.connect()
        w.send("WATCH s %d\r\n" % t)
        eq(w.line(timeout=10), "OK unclaimed", "not ATTACHed within "
           "reclaim-grace -> OK unclaimed")
        eq(c.listing("HOLDERS s"), [], "and it is released")


def test_several_watchers():
    with start_semd("--semaphore", "s", "2") as d:
        a = d.connect()
        t = expect_token(a, "ACQUIRE s")
        t2 = expect_token(a, "ACQUIRE s")
        ws = [watch(d, "s", t) for _ in range(4)]
        other = watch(d, "s", t2)
        rows = a.listing("CLIENTS")
        eq(sorted((r["waiting"], r["cmd"]) for r in rows
                  if r["cmd"] == "watch"), [("1", "watch")] * 5,
           "CLIENTS shows watchers as waiting=1 cmd=watch")
        expect(a, "RELEASE s %d" % t, "OK")
        eq([w.line() for w in ws], ["OK released"] * 4,
           "every watcher of the grant is answered")
        ok(other.no_reply(0.2), "a watcher of another grant is not")
        # Watch again on the same connections, then end it another way.
        for w in ws:
            w.send("WATCH s %d\r\n" % t2)
        ok(all(w.no_reply(0.2) for w in ws), "they watch the other grant")
        a.close()
        eq([w.line() for w in ws + [other]], ["OK closed"] * 5,
           "all five watchers of one grant are answered")


def test_timeout():
    with start_semd("--semaphore", "s", "1") as d:
        a = d.connect()
        t = expect_token(a, "ACQUIRE s")
        w = d.connect()
        t0 = time.monotonic()
        eq(w.cmd("WATCH s %d TIMEOUT 300" % t, timeout=10), "TIMEOUT",
           "still held when the wait ends -> TIMEOUT")
        ok(time.monotonic() - t0 >= 0.25, "...not before the wait ends")
        expect(w, "WATCH s %d TIMEOUT 0" % t, "TIMEOUT",
               "TIMEOUT 0 answers at once")
        eq([int(h["token"]) for h in w.listing("HOLDERS s")], [t],
           "the grant is still held")
        w.send("WATCH s %d TIMEOUT 30000\r\n" % t)
        ok(w.no_reply(0.2), "a WATCH with a long TIMEOUT waits")
        expect(a, "RELEASE s %d" % t, "OK")
        eq(w.line(), "OK released", "...and is answered when the grant ends")
        time.sleep(0.1)
        ok(w.no_reply(0.2), "no late TIMEOUT after the answer")


def test_notheld_nosem():
    with start_semd("--semaphore", "s", "2", "--semaphore", "u", "1") as d:
        a = d.connect()
        t = expect_token(a, "ACQUIRE s")
        expect_err(a, "WATCH s %d" % (t + 100), "NOTHELD",
                   "a token never granted -> ERR NOTHELD at once")
        expect_err(a, "WATCH u %d" % t, "NOTHELD",
                   "a token of another semaphore -> ERR NOTHELD")
        expect(a, "RELEASE s %d" % t, "OK")
        expect_err(a, "WATCH s %d" % t, "NOTHELD",
                   "a released token -> ERR NOTHELD")
        expect_err(a, "WATCH nosuch 1", "NOSEM",
                   "an unknown semaphore -> ERR NOSEM")
        expect_err(a, "WATCH s", "PROTO", "WATCH s -> ERR PROTO")
        expect_err(a, "WATCH s 1 TIMEOUT", "PROTO",
                   "WATCH s 1 TIMEOUT -> ERR PROTO")


def test_pipelined_after_watch():
    with start_semd("--semaphore", "s", "1") as d:
        a = d.connect()
        t = expect_token(a, "ACQUIRE s")
        w = d.connect()
        w.send("WATCH s %d\r\nPING\r\nTRY s\r\n" % t)
        ok(w.no_reply(0.3), "requests pipelined after a WATCH wait for it")
        eq([int(h["token"]) for h in a.listing("HOLDERS s")], [t],
           "the TRY behind the WATCH has not run")
        expect(a, "RELEASE s %d" % t, "OK")
        eq(w.lines(3)[:2], ["OK released", "OK PONG"],
           "then the replies come, in order")


def test_watcher_goes_away():
    with start_semd("--semaphore", "s", "1") as d:
        a = d.connect()
        t = expect_token(a, "ACQUIRE s")
        gone = watch(d, "s", t)
        stays = watch(d, "s", t)
        killed = watch(d, "s", t)
        kid = conn_id(a, killed)
        gone.close()
        expect(a, "KILL %d" % kid, "OK", "KILL of a watching connection")
        ok(killed.expect_closed(5), "the killed watcher is closed")
        ok(wait_until(lambda: len([r for r in a.listing("CLIENTS")
                                   if r["cmd"] == "watch"]) == 1, 5),
           "closed and killed watchers leave CLIENTS")
        expect(a, "RELEASE s %d" % t, "OK")
        eq(stays.line(), "OK released", "the remaining watcher is answered")
        expect(a, "PING", "OK PONG", "semd is fine (no use after free: "
               "the sanitizers check the log)")
        # A watcher that closes alone leaves no trace either.
        t2 = expect_token(a, "ACQUIRE s")
        lone = watch(d, "s", t2)
        lone.close()
        time.sleep(0.2)
        expect(a, "RELEASE s %d" % t2, "OK",
               "releasing a grant whose only watcher left")


def test_watch_own_grant():
    with start_semd("--semaphore", "s", "2") as d:
        a = d.connect()
        o = d.connect()
        tl = expect_token(a, "ACQUIRE s LEASE 60000")
        a.send("WATCH s %d\r\n" % tl)
        ok(a.no_reply(0.3), "a connection may watch its own lease")
        expect(o, "RELEASE s %d" % tl, "OK")
        eq(a.line(), "OK released", "...and learns it was released")
        tb = expect_token(a, "ACQUIRE s")
        a.send("WATCH s %d\r\n" % tb)
        ok(a.no_reply(0.3), "...or its own bound grant")
        expect(o, "REVOKE s %d" % tb, "OK")
        eq(a.line(), "OK revoked", "...and learns it was revoked")
        tb = expect_token(a, "ACQUIRE s")
        a.send("WATCH s %d\r\n" % tb)
        ok(a.no_reply(0.3), "watching its own bound grant again")
        a.close()
        ok(wait_until(lambda: o.listing("HOLDERS s") == [], 5),
           "closing it releases the grant; the watcher goes with it")


run(test_released, test_expired, test_revoked, test_closed, test_unclaimed,
    test_several_watchers, test_timeout, test_notheld_nosem,
    test_pipelined_after_watch, test_watcher_goes_away, test_watch_own_grant,
    time_limit=120)
