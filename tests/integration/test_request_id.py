#!/usr/bin/env python3
"""Idempotent lease acquire over TCP (PROTOCOL 1.1): ACQUIRE, TRY and
ACQUIREALL with ID <request-id>. A repeat while the lease is held answers
its token and grants nothing, on any connection; another n or other
semaphores is ERR EXISTS; a repeat of a waiting request takes its place
in the queue and the old one is answered ERR EXISTS. The reply lost by
closing the connection right after sending is the case it is for."""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F403


def test_repeat_same_token():
    with start_semd("--semaphore", "jobs", "3", "--semaphore", "other",
                    "3") as d:
        c1, c2 = d.connect(), d.connect()
        t = expect_token(c1, "ACQUIRE jobs 2 LEASE 60000 ID job-42")
        expect(c2, "ACQUIRE jobs 2 LEASE 5 TIMEOUT 0 ID job-42", "OK %d" % t,
               "the same id on another connection: the same token")
        expect(c2, "TRY jobs 2 ID job-42 LEASE 1", "OK %d" % t,
               "TRY with the id: the same token")
        hs = c1.listing("HOLDERS jobs")
        eq([(h["token"], h["n"]) for h in hs], [(str(t), "2")],
           "HOLDERS shows one grant")
        ok(int(hs[0]["ttl_ms"]) > 50000,
           "the repeat's LEASE changed nothing", hs[0]["ttl_ms"])
        expect_err(c2, "ACQUIRE jobs 1 LEASE 60000 ID job-42", "EXISTS",
                   "the same id with another n: EXISTS")
        expect_err(c2, "ACQUIREALL jobs 2 other 1 LEASE 60000 ID job-42",
                   "EXISTS", "the same id with other semaphores: EXISTS")
        t2 = expect_token(c2, "ACQUIRE other 2 LEASE 60000 ID job-42",
                          "the same id on another semaphore: a new grant")
        ok(t2 != t, "another token")
        t3 = expect_token(c2, "ACQUIRE jobs 1 LEASE 60000 ID JOB-42",
                          "ids are case-sensitive")
        eq(c1.info("jobs")["used"], "3", "jobs: 2 + 1 held")
        expect(c1, "RELEASE jobs %d" % t, "OK")
        t4 = expect_token(c2, "ACQUIRE jobs 2 LEASE 60000 ID job-42",
                          "once released, the id grants anew")
        ok(t4 > t3, "a new, larger token")


def test_id_syntax():
    with start_semd("--semaphore", "s", "1") as d:
        c = d.connect()
        expect_err(c, "ACQUIRE s ID x", "PROTO", "ID without LEASE: PROTO")
        expect_err(c, "TRY s ID x", "PROTO", "TRY: ID without LEASE: PROTO")
        expect_err(c, "ACQUIRE s LEASE 5 ID a@b", "PROTO",
                   "a byte outside the name alphabet: PROTO")
        expect_err(c, "ACQUIRE s LEASE 5 ID " + "x" * 65, "PROTO",
                   "65 bytes: PROTO")
        expect_err(c, "ACQUIRE s LEASE 5 ID a ID a", "PROTO",
                   "ID twice: PROTO")
        expect_err(c, "ACQUIRE nope LEASE 5 ID a", "NOSEM", "NOSEM")
        expect_err(c, "ACQUIRE s 2 LEASE 5 ID a", "RANGE", "RANGE")
        t = expect_token(c, "ACQUIRE s LEASE 60000 ID " + "x" * 64,
                         "64 bytes are fine")
        expect(c, "ACQUIRE s lease 60000 id " + "x" * 64, "OK %d" % t,
               "keywords in any case; the options in any order")


def test_lost_reply():
    """The reply is lost: the client closes right after sending, before
    reading. The same request on a new connection learns the token."""
    with start_semd("--semaphore", "jobs", "2") as d:
        lost = d.connect()
        lost.send("ACQUIRE jobs LEASE 60000 ID req-1\r\n")
        lost.close()
        c = d.connect()
        t = is_token(c.cmd("ACQUIRE jobs LEASE 60000 ID req-1"),
                     "the retry on a new connection: OK <token>")
        hs = c.listing("HOLDERS jobs")
        eq([h["token"] for h in hs], [str(t)],
           "HOLDERS shows one grant, with that token")
        expect(c, "ACQUIRE jobs LEASE 60000 ID req-1", "OK %d" % t,
               "and again")
        eq(c.info("jobs")["used"], "1", "one permit used, not two")


def test_waiting_takeover():
    with start_semd("--semaphore", "s", "1") as d:
        ctl, old, behind, new = (d.connect(), d.connect(), d.connect(),
                                 d.connect())
        t0 = expect_token(ctl, "ACQUIRE s")
        old.send("ACQUIRE s LEASE 60000 ID w-1\r\nPING\r\n")
        ok(wait_until(lambda: ctl.info("s")["waiters"] == "1"), "old waits")
        behind.send("ACQUIRE s\r\n")
        ok(wait_until(lambda: ctl.info("s")["waiters"] == "2"),
           "another waits behind it")
        expect(new, "NAME newer", "OK")
        expect_err(new, "TRY s 1 LEASE 60000 ID w-1 X", "PROTO",
                   "a malformed retry changes nothing")
        new.send("ACQUIRE s LEASE 60000 ID w-1\r\n")
        r = old.line(10)
        ok(r.startswith("ERR EXISTS "), "the old request: ERR EXISTS", r)
        eq(old.line(10), "OK PONG", "its pipelined request runs next")
        ws = ctl.listing("WAITERS s")
        eq(len(ws), 2, "still two waiters")
        eq([w["name"] for w in ws][:1], ["newer"],
           "the new one is at the head, in the old one's place")
        ok(new.no_reply(0.2), "the new one waits")
        expect(ctl, "RELEASE s %d" % t0, "OK")
        t = is_token(new.line(10), "the new one is granted in the old "
                     "one's place, ahead of the other waiter")
        ok(behind.no_reply(0.2), "the other still waits")
        expect(old, "ACQUIRE s LEASE 60000 ID w-1 TIMEOUT 0", "OK %d" % t,
               "a repeat now: the token")
        expect(ctl, "RELEASE s %d" % t, "OK")
        is_token(behind.line(10), "then the other")


def test_waiting_other_n():
    with start_semd("--semaphore", "s", "2") as d:
        ctl, old, new = d.connect(), d.connect(), d.connect()
        t0 = expect_token(ctl, "ACQUIRE s 2")
        old.send("ACQUIRE s 1 LEASE 60000 ID w\r\n")
        ok(wait_until(lambda: ctl.info("s")["waiters"] == "1"), "old waits")
        expect_err(new, "ACQUIRE s 2 LEASE 60000 ID w", "EXISTS",
                   "the same id waiting with another n: EXISTS")
        expect_err(new, "ACQUIREALL s 1 s2 1 LEASE 60000 ID w", "NOSEM",
                   "(NOSEM before the id)")
        ok(old.no_reply(0.2), "the old request still waits")
        expect(ctl, "RELEASE s %d" % t0, "OK")
        is_token(old.line(10), "and is granted")


def test_acquireall_ids():
    with start_semd("--semaphore", "gpu", "1", "--semaphore", "db", "2") \
            as d:
        c1, c2 = d.connect(), d.connect()
        t = expect_token(c1, "ACQUIREALL gpu 1 db 2 LEASE 60000 ID job")
        expect(c2, "ACQUIREALL db 2 gpu 1 LEASE 60000 ID job", "OK %d" % t,
               "a repeat naming them in another order: the token")
        expect_err(c2, "ACQUIREALL gpu 1 db 1 LEASE 60000 ID job", "EXISTS",
                   "another n on one of them: EXISTS")
        expect_err(c2, "ACQUIRE gpu LEASE 60000 ID job", "EXISTS",
                   "one of its semaphores alone: EXISTS")
        eq(len(c1.listing("HOLDERS db")), 1, "one grant")
        # A waiting ACQUIREALL is taken over whole.
        expect(c1, "RELEASE db %d" % t, "OK")
        tg = expect_token(c1, "ACQUIRE gpu")
        c2.send("ACQUIREALL gpu 1 db 1 LEASE 60000 ID j2\r\n")
        ok(wait_until(lambda: c1.info("db")["waiters"] == "1"), "waits")
        c3 = d.connect()
        c3.send("ACQUIREALL db 1 gpu 1 LEASE 60000 ID j2\r\n")
        r = c2.line(10)
        ok(r.startswith("ERR EXISTS"), "the old ACQUIREALL: ERR EXISTS", r)
        eq((c1.info("gpu")["waiters"], c1.info("db")["waiters"]), ("1", "1"),
           "one waiter on each queue: the new one")
        expect(c1, "RELEASE gpu %d" % tg, "OK")
        t3 = is_token(c3.line(10), "the new one is granted")
        eq(c1.listing("HOLDERS gpu")[0].get("multi"), "2", "multi=2")
        expect(c2, "ACQUIREALL gpu 1 db 1 LEASE 60000 ID j2", "OK %d" % t3,
               "and answered to a repeat")


run(test_repeat_same_token, test_id_syntax, test_lost_reply,
    test_waiting_takeover, test_waiting_other_n, test_acquireall_ids,
    time_limit=120)
