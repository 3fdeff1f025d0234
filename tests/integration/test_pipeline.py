#!/usr/bin/env python3
"""Pipelining and framing: many requests in one write are answered in
order, one reply each; requests split over many writes; half-close."""
import os
import re
import socket
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F403


def test_ten_in_one_write():
    with start_semd() as d:
        c = d.connect()
        reqs = ["CREATE p 2", "PING", "INFO p", "ACQUIRE p", "TRY p 2",
                "FOO", "INFO nosuch", "ACQUIRE p", "INFO p", "LIST"]
        c.send("".join(r + "\r\n" for r in reqs))
        got = c.lines(11)
        eq(got[0], "OK", "1: CREATE p 2")
        eq(got[1], "OK PONG", "2: PING")
        eq(info_v1(got[2]), "OK name=p capacity=2 used=0 available=2 holders=0 "
           "waiters=0", "3: INFO p")
        match(got[3], r"OK [0-9]+", "4: ACQUIRE p")
        eq(got[4], "TIMEOUT", "5: TRY p 2")
        is_err(got[5], "PROTO", "6: FOO")
        is_err(got[6], "NOSEM", "7: INFO nosuch")
        match(got[7], r"OK [0-9]+", "8: ACQUIRE p")
        eq(info_v1(got[8]), "OK name=p capacity=2 used=2 available=0 holders=2 "
           "waiters=0", "9: INFO p")
        eq(got[9:], ["OK 1", "name=p capacity=2 used=2 available=0 "
                     "holders=2 waiters=0"], "10: LIST")
        ok(c.no_reply(0.3), "exactly one reply per request, nothing more")


def test_many_in_one_write():
    with start_semd("--semaphore", "m", "1000") as d:
        c = d.connect()
        reqs = []
        for i in range(1000):
            reqs.append("PING" if i % 3 else "ACQUIRE m")
        c.send("".join(r + "\r\n" for r in reqs))
        got = c.lines(len(reqs), timeout=20)
        bad = []
        toks = []
        for i, (r, g) in enumerate(zip(reqs, got)):
            if r == "PING" and g != "OK PONG":
                bad.append((i, r, g))
            elif r != "PING":
                m = re.fullmatch(r"OK ([0-9]+)", g)
                if not m:
                    bad.append((i, r, g))
                else:
                    toks.append(int(m.group(1)))
        ok(not bad, "1000 pipelined requests: 1000 replies in order",
           "first mismatches %r" % bad[:5])
        ok(toks == sorted(set(toks)),
           "tokens of pipelined grants strictly increase")
        expect(c, "INFO m", "OK name=m capacity=1000 used=%d available=%d "
               "holders=%d waiters=0" % (len(toks), 1000 - len(toks),
                                         len(toks)))


def test_split_writes():
    with start_semd() as d:
        c = d.connect()
        for part in ("PI", "N", "G", "\r", "\n"):
            c.send(part)
            if part != "\n":
                ok(c.no_reply(0.1), "no reply to a partial line %s" %
                   show(part))
        eq(c.line(), "OK PONG", "a request sent in 5 writes is served")
        data = "CREATE x 1\r\nINFO x\r\nPING\n"
        for ch in data:
            c.send(ch)
        eq([info_v1(x) for x in c.lines(3)], ["OK", "OK name=x capacity=1 used=0 available=1 "
                        "holders=0 waiters=0", "OK PONG"],
           "three requests sent one byte per write")
        # A write that ends in the middle of a request, then the rest.
        c.send("PING\r\nINFO ")
        eq(c.line(), "OK PONG", "complete request answered at once")
        ok(c.no_reply(0.2), "partial request waits for its newline")
        c.send("x\r\n")
        eq(info_v1(c.line()), "OK name=x capacity=1 used=0 available=1 holders=0 "
           "waiters=0", "the rest of the request completes it")


def test_pipelined_listings():
    with start_semd("--semaphore", "a", "2", "--semaphore", "b", "1") as d:
        c = d.connect()
        c.send("LIST\r\nPING\r\nHOLDERS a\r\nWAITERS a\r\nSTATS\r\nPING\r\n")
        eq(c.lines(3), ["OK 2",
                        "name=a capacity=2 used=0 available=2 holders=0 "
                        "waiters=0",
                        "name=b capacity=1 used=0 available=1 holders=0 "
                        "waiters=0"], "LIST first")
        eq(c.line(), "OK PONG", "then PING")
        eq(c.line(), "OK 0", "then HOLDERS a")
        eq(c.line(), "OK 0", "then WAITERS a")
        head = c.line()
        m = re.fullmatch(r"OK ([0-9]+)", head)
        ok(m, "then STATS", repr(head))
        if m:
            c.lines(int(m.group(1)))
        eq(c.line(), "OK PONG", "then the last PING")


def test_half_close():
    with start_semd() as d:
        ctl = d.connect()
        c = connect(d.port)
        c.send("CREATE h 1\r\nACQUIRE h\r\nPING\r\n")
        c.sock.shutdown(socket.SHUT_WR)
        got = []
        try:
            got = c.lines(3)
        except Exception as e:
            got.append("<%s>" % e)
        ok(len(got) == 3 and got[0] == "OK" and
           re.fullmatch(r"OK [0-9]+", got[1]) and got[2] == "OK PONG",
           "a half-closed peer still gets the replies to what it sent",
           repr(got))
        ok(c.expect_closed(5), "then the server closes the connection")
        ok(wait_until(lambda: ctl.info("h")["used"] == "0"),
           "closing released its bound permit")
        c.close()
        # A waiter whose client has stopped sending is dropped.
        expect_token(ctl, "ACQUIRE h")
        w = connect(d.port)
        w.send("ACQUIRE h\r\nPING\r\n")
        ok(wait_until(lambda: ctl.info("h")["waiters"] == "1", 10),
           "the ACQUIRE waits")
        w.sock.shutdown(socket.SHUT_WR)
        ok(wait_until(lambda: ctl.info("h")["waiters"] == "0", 10),
           "a half-closed peer's waiting ACQUIRE leaves the queue")
        ok(w.expect_closed(10), "and that connection is closed")
        eq(ctl.info("h")["used"], "1", "the holder is unaffected")
        w.close()


if __name__ == "__main__":
    run(test_ten_in_one_write, test_many_in_one_write, test_split_writes,
        test_pipelined_listings, test_half_close)
