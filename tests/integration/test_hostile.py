#!/usr/bin/env python3
"""Hostile and broken input: garbage bytes, random binary lines,
HTTP-looking lines, connection churn, clients vanishing mid-way. The
daemon answers ERR (or closes where specified), never crashes, and never
disturbs other connections."""
import os
import random
import socket
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F403

HTTP_PREFIXES = ("GET ", "POST ", "HEAD ", "PUT ", "Host:")


def test_garbage_bytes():
    with start_semd("--semaphore", "s", "2") as d:
        o = d.connect()
        t = expect_token(o, "ACQUIRE s")
        c = d.connect()
        for req in (b"\x00", b"\x00\x00\x00", b"\xff", b"\xff\xfe\xfd",
                    b"PING\x00", b"\x00PING", b"PI\x00NG", b"\x1b[A",
                    b"\x7f", b"\xc3\xa9", b"CREATE \xff 1",
                    b"INFO s\x00", b"ACQUIRE s \x00", b"\x01\x02\x03 \x04",
                    b"ACQUIRE s 1\x00", b"RELEASE s 1\xff"):
            c.send(req + b"\r\n")
            is_err(c.line(), "PROTO", "%s -> ERR PROTO" % show(req))
        expect(c, "PING", "OK PONG", "the connection is still usable")
        expect(o, "CHECK s %d" % t, "OK n=1 kind=conn ttl_ms=-",
               "another connection's permit is untouched")
        expect(o, "INFO s", "OK name=s capacity=2 used=1 available=1 "
               "holders=1 waiters=0", "state unchanged")


def test_random_binary_lines():
    rnd = random.Random(20261122)
    alphabet = [b for b in range(256) if b != 0x0A]
    lines = []
    for _ in range(300):
        n = rnd.randint(1, 300)
        ln = bytes(rnd.choice(alphabet) for _ in range(n))
        # At least one byte that no valid request contains, away from the
        # end (a final "\r" would be dropped as part of the line end).
        pos = rnd.randrange(len(ln))
        ln = ln[:pos] + bytes([rnd.choice((0x00, 0xff, 0x80, 0x01))]) + \
            ln[pos:]
        if ln.rstrip(b"\r").strip(b" \t") == b"":
            continue
        if any(ln.startswith(p.encode()) for p in HTTP_PREFIXES):
            continue
        lines.append(ln)
    with start_semd("--semaphore", "s", "1") as d:
        o = d.connect()
        t = expect_token(o, "ACQUIRE s")
        c = d.connect()
        c.send(b"".join(ln + b"\r\n" for ln in lines))
        got = c.lines(len(lines), timeout=20)
        bad = [(show(ln), g) for ln, g in zip(lines, got)
               if not g.startswith("ERR PROTO ")]
        ok(not bad, "%d random binary lines -> %d ERR PROTO" %
           (len(lines), len(lines)), "first bad: %r" % bad[:3])
        expect(c, "PING", "OK PONG", "the connection is still usable")
        expect(o, "CHECK s %d" % t, "OK n=1 kind=conn ttl_ms=-",
               "another connection's permit is untouched")
        ok(d.alive(), "the daemon is alive")


def test_odd_requests():
    with start_semd("--semaphore", "s", "1") as d:
        c = d.connect()
        for req in ("ACQUIRE s 99999999999999999999999999999999",
                    "ACQUIRE s 1 TIMEOUT 99999999999999999999999",
                    "RELEASE s 999999999999999999999999999999",
                    "CREATE x 00000000000000000000000000000000001x",
                    " ".join(["a"] * 1000),
                    "ACQUIRE " + "s " * 500,
                    "GET", "POST", "Host", "get",
                    "ACQUIRE s TIMEOUT 1 LEASE 1 TIMEOUT 1",
                    "%s%s%s%s", "\\x41", "'; DROP TABLE s; --"):
            expect_err(c, req, "PROTO")
        expect(c, "PING", "OK PONG", "still usable")


def test_http_lines():
    with start_semd("--semaphore", "s", "1") as d:
        o = d.connect()
        t = expect_token(o, "ACQUIRE s")
        warns0 = len(d.log_lines("warn"))
        for i, prefix in enumerate(HTTP_PREFIXES):
            c = d.connect()
            req = {"Host:": "Host: 127.0.0.1:7313\r\n\r\n"}.get(
                prefix, prefix + "/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
            c.send(req)
            closed = c.expect_closed(5)
            ok(closed and c.extra == b"" and c.buf == b"",
               "%s closes the connection without a reply" % show(prefix),
               "closed %s, got %r" % (closed, c.buf))
            # The first is logged; the others are counted (log_repeat).
            ok(wait_until(lambda: len(d.log_lines("warn")) == warns0 + 1, 5)
               and len(d.log_lines("warn")) == warns0 + 1,
               "...and logs one warning" if i == 0 else
               "...and is counted, not logged again")
        c = d.connect()
        c.send("PING\r\nPOST /x HTTP/1.0\r\nPING\r\n")
        eq(c.try_line(5), "OK PONG", "a request before the HTTP line is "
           "answered")
        ok(c.expect_closed(5) and c.extra == b"",
           "then the connection is closed without more replies")
        expect(o, "CHECK s %d" % t, "OK n=1 kind=conn ttl_ms=-",
               "another connection is untouched")


def test_churn_and_vanishing_clients():
    with start_semd("--semaphore", "s", "3") as d:
        o = d.connect()
        t = expect_token(o, "ACQUIRE s")
        for i in range(200):
            s = socket.create_connection(("127.0.0.1", d.port), 10)
            kind = i % 5
            if kind == 1:
                s.sendall(b"PIN")                    # partial line
            elif kind == 2:
                s.sendall(b"LIST\r\n" * 50)          # replies never read
            elif kind == 3:
                s.sendall(b"ACQUIRE s\r\nACQUIRE s\r\nACQUIRE s\r\n")
            elif kind == 4:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                             b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST
                s.sendall(b"STATS\r\n")
            s.close()
        ok(d.alive(), "200 clients connecting and vanishing: daemon alive")
        expect(o, "PING", "OK PONG", "a steady client is still served")
        ok(wait_until(lambda: dict(list(o.info("s").items())[:6]) == {
            "name": "s", "capacity": "3", "used": "1", "available": "2",
            "holders": "1", "waiters": "0"}, 10),
           "every vanished client's permits and waiters are gone",
           repr(o.info("s")))
        ok(wait_until(lambda: o.stats().get("connections") == "1", 10),
           "STATS connections is back to 1", repr(o.stats().get(
               "connections")))
        expect(o, "CHECK s %d" % t, "OK n=1 kind=conn ttl_ms=-")


if __name__ == "__main__":
    run(test_garbage_bytes, test_random_binary_lines, test_odd_requests,
        test_http_lines, test_churn_and_vanishing_clients)
