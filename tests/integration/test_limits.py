#!/usr/bin/env python3
"""Server limits: max-line (ERR TOOLONG, bounded memory), max-output,
maxclients, max-semaphores, and the backlog behind a waiting ACQUIRE."""
import os
import socket
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F403

MIB = 1024 * 1024


def ping_line(total):
    """A valid PING request line of exactly `total` bytes (before CRLF)."""
    return "PING" + " " * (total - 4)


def test_max_line_default():
    with start_semd("--semaphore", "s", "1") as d:
        o = d.connect()
        t = expect_token(o, "ACQUIRE s")
        c = d.connect()
        c.send(ping_line(4096) + "\r\n")
        eq(c.line(), "OK PONG", "a line of exactly 4096 bytes + CRLF is "
           "served")
        c.send(ping_line(4096) + "\n")
        eq(c.line(), "OK PONG", "a line of exactly 4096 bytes + LF is served")
        c.send(ping_line(4096))
        ok(c.no_reply(0.5), "4096 bytes without a newline: still waiting "
           "for the newline")
        c.send("\r\n")
        eq(c.line(), "OK PONG", "...which then completes the request")
        c.send("PING\r\n" + ping_line(4097) + "\r\nPING\r\n")
        eq(c.line(), "OK PONG", "the request before the long line is served")
        is_err(c.line(), "TOOLONG", "a line of 4097 bytes -> ERR TOOLONG")
        ok(c.expect_closed(5), "...and the connection is closed")
        eq(getattr(c, "extra", b""), b"",
           "nothing after the long line is answered")
        c2 = d.connect()
        c2.send("x" * 4097)
        is_err(c2.line(5), "TOOLONG", "4097 bytes without any newline -> "
               "ERR TOOLONG at once")
        ok(c2.expect_closed(5), "...and the connection is closed")
        expect(o, "CHECK s %d" % t, "OK n=1 kind=conn ttl_ms=-",
               "another connection's permit is untouched")


def test_max_line_custom():
    with start_semd("--max-line", "100") as d:
        c = d.connect()
        c.send(ping_line(100) + "\r\n")
        eq(c.line(), "OK PONG", "--max-line 100: a 100-byte line is served")
        c.send(ping_line(60))
        ok(c.no_reply(0.2), "60 bytes, no newline: waiting")
        c.send(" " * 41)
        is_err(c.line(5), "TOOLONG", "101 bytes sent in two writes -> "
               "ERR TOOLONG")
        ok(c.expect_closed(5), "...and the connection is closed")
        c = d.connect()
        c.send("CREATE " + "x" * 200 + " 1\r\n")
        is_err(c.line(5), "TOOLONG", "a 209-byte CREATE with max-line 100 "
               "-> ERR TOOLONG")
        ok(c.expect_closed(5), "...and the connection is closed")


def send_flood(conn, total, chunk=64 * 1024):
    """Send up to total bytes without a newline; stop when the server
    closes. Returns the number of bytes the kernel accepted."""
    sent = 0
    conn.sock.settimeout(10)
    data = b"A" * chunk
    try:
        while sent < total:
            n = conn.sock.send(data[:min(chunk, total - sent)])
            if n <= 0:
                break
            sent += n
    except (BrokenPipeError, ConnectionResetError, socket.timeout, OSError):
        pass
    return sent


def test_one_mib_without_newline():
    with start_semd() as d:
        o = d.connect()
        expect(o, "PING", "OK PONG")
        rss0 = d.rss_kb()
        c = d.connect()
        send_flood(c, MIB)
        is_err(c.try_line(10), "TOOLONG",
               "1 MiB without a newline -> ERR TOOLONG")
        ok(c.expect_closed(10), "...and the connection is closed")
        rss1 = d.rss_kb()
        note("VmRSS before %s kB, after %s kB" % (rss0, rss1))
        ok(rss0 is not None and rss1 is not None and
           rss1 - rss0 < 16 * 1024 and rss1 < 64 * 1024,
           "the daemon's RSS stays small (grew < 16 MiB, < 64 MiB in all)",
           "VmRSS %s kB -> %s kB" % (rss0, rss1))
        expect(o, "PING", "OK PONG", "other connections still served")


def test_flood_is_not_swallowed():
    with start_semd() as d:
        rss0 = d.rss_kb()
        c = d.connect()
        sent = send_flood(c, 64 * MIB)
        ok(sent < 64 * MIB, "a 64 MiB line without newline: the daemon "
           "closes before swallowing it all", "sent %d bytes" % sent)
        rss1 = d.rss_kb()
        ok(rss0 is not None and rss1 is not None and
           rss1 - rss0 < 16 * 1024,
           "RSS grew by less than 16 MiB", "VmRSS %s kB -> %s kB" %
           (rss0, rss1))
        o = d.connect()
        expect(o, "PING", "OK PONG", "the daemon still serves others")


def test_max_output():
    with start_semd("--max-output", "4096") as d:
        ctl = d.connect()
        nsem = 300
        ctl.send("".join("CREATE sem-%03d 1\r\n" % i for i in range(nsem)))
        got = ctl.lines(nsem, timeout=20)
        ok(all(g == "OK" for g in got), "%d CREATEs" % nsem)
        base = int(ctl.stats()["connections"])
        x = connect(d.port, rcvbuf=4096)
        x.send("PING\r\n")
        eq(x.line(), "OK PONG", "the slow reader connects")
        ok(wait_until(lambda: int(ctl.stats()["connections"]) == base + 1),
           "STATS connections counts it")
        nlist = 1000
        x.send("LIST\r\n" * nlist)       # ~20 MB of replies, never read
        closed = wait_until(
            lambda: int(ctl.stats()["connections"]) == base, 20, 0.1)
        ok(closed, "a connection whose unread output exceeds max-output is "
           "closed by the daemon")
        nbytes, eof = x.drain(20)
        full = nlist * (len("OK %d\r\n" % nsem) + nsem * len(
            "name=sem-000 capacity=1 used=0 available=1 holders=0 "
            "waiters=0\r\n"))
        ok(eof and nbytes < full, "the slow reader sees EOF before all "
           "replies", "read %d of %d bytes, eof %s" % (nbytes, full, eof))
        x.close()
        y = d.connect()
        expect(y, "PING", "OK PONG", "another connection still works")
        expect(y, "INFO sem-007", "OK name=sem-007 capacity=1 used=0 "
               "available=1 holders=0 waiters=0")
        ok(any(" warn: " in ln for ln in d.log_lines()),
           "a warning is logged")


def test_listing_over_max_output_reaches_a_reader():
    """Issue 10: LIST of 100 semaphores with --max-output 4096 used to close
    the connection before a byte was sent, although the client reads."""
    with start_semd("--max-output", "4096") as d:
        c = d.connect()
        names = ["a-semaphore-with-a-long-name-%03d" % i for i in range(100)]
        c.send("".join("CREATE %s 1\r\n" % n for n in names))
        ok(all(g == "OK" for g in c.lines(100, timeout=20)), "100 CREATEs")
        rows = c.listing("LIST", timeout=20)
        eq(sorted(r["name"] for r in rows), names, "LIST, about 8 KB, twice "
           "max-output, reaches a client that reads it, whole")
        expect(c, "PING", "OK PONG", "and the connection stays open")
        rows = c.listing("LIST", timeout=20)
        eq(len(rows), 100, "a second LIST too")


def test_slow_senders_are_closed():
    """Issue 10: connections sending a byte a second without a newline
    held their slots for ever, so anyone could fill maxclients."""
    with start_semd("--line-timeout", "1s", "--maxclients", "40") as d:
        ctl = d.connect()
        base = int(ctl.stats()["connections"])
        slow = [connect(d.port) for _ in range(30)]
        t0 = time.monotonic()
        alive = list(slow)
        while time.monotonic() - t0 < 4 and alive:
            still = []
            for s in alive:
                try:
                    s.sock.send(b"P")
                    still.append(s)
                except OSError:
                    pass
            alive = still
            time.sleep(0.3)
        closed = wait_until(
            lambda: int(ctl.stats()["connections"]) == base, 10, 0.1)
        ok(closed, "30 connections trickling a line without a newline are "
           "closed after line-timeout (1 s)", ctl.stats()["connections"])
        for s in slow:
            s.close()
        fresh = [d.connect() for _ in range(30)]
        ok(all(f.cmd("PING") == "OK PONG" for f in fresh),
           "their slots serve new clients")
        ok(any("line-timeout" in ln for ln in d.log_lines()),
           "the log says why they were closed")


def test_idle_and_auth_timeouts():
    with start_semd("--timeout", "1s", "--semaphore", "s", "1") as d:
        idle, holder = d.connect(), d.connect()
        expect(idle, "PING", "OK PONG")
        expect_token(holder, "ACQUIRE s")
        ok(idle.expect_closed(5), "--timeout 1s: an idle connection is "
           "closed")
        expect(holder, "PING", "OK PONG", "one holding a bound permit is "
               "not (closing it would release the permit)")
    with start_semd("--requirepass", "pw", "--auth-timeout", "1s") as d:
        anon, authed = d.connect(), d.connect()
        expect(authed, "AUTH pw", "OK")
        expect(anon, "PING", "OK PONG")
        ok(anon.expect_closed(5), "--auth-timeout 1s: a connection that "
           "does not AUTH is closed")
        expect(authed, "PING", "OK PONG", "an authenticated one stays")


def test_maxclients():
    with start_semd("--maxclients", "3") as d:
        cs = [d.connect() for _ in range(3)]
        ok(all(c.cmd("PING") == "OK PONG" for c in cs),
           "--maxclients 3: 3 connections served")
        x = connect(d.port)
        is_err(x.try_line(5), "LIMIT", "the 4th connection gets ERR LIMIT")
        ok(x.expect_closed(5), "...and is closed")
        x.close()
        ok(all(c.cmd("PING") == "OK PONG" for c in cs),
           "the first 3 are unaffected")
        cs[0].close()

        def fourth_ok():
            try:
                with connect(d.port) as y:
                    return y.cmd("PING") == "OK PONG"
            except Exception:
                return False
        ok(wait_until(fourth_ok, 10, 0.1),
           "after one closes, a new connection is served")
        ok(d.log_lines("warn"), "the rejection is logged as a warning")


def test_max_semaphores():
    with start_semd("--max-semaphores", "3") as d:
        c = d.connect()
        for n in ("a", "b", "c"):
            expect(c, "CREATE %s 1" % n, "OK")
        expect_err(c, "CREATE d 1", "LIMIT",
                   "--max-semaphores 3: the 4th CREATE -> ERR LIMIT")
        expect(c, "CREATE a 1", "OK", "re-CREATE of an existing one is OK")
        expect(c, "DELETE b", "OK")
        expect(c, "CREATE d 1", "OK", "after a DELETE there is room again")


def test_backlog_behind_wait():
    with start_semd("--semaphore", "s", "1") as d:
        h = d.connect()
        t = expect_token(h, "ACQUIRE s")
        b = connect(d.port)
        b.send("ACQUIRE s\r\n")
        ok(wait_until(lambda: h.info("s")["waiters"] == "1"), "b waits")
        # More than 1 MiB of requests pipelined behind the waiting ACQUIRE.
        data = b"PING\r\n" * (2 * MIB // 6 + 1000)
        b.sock.settimeout(10)
        try:
            b.sock.sendall(data)
        except OSError:
            pass
        ok(wait_until(lambda: h.info("s")["waiters"] == "0", 10),
           "over 1 MiB pipelined behind a waiting ACQUIRE: the connection "
           "is closed and its waiter dropped")
        nbytes, eof = b.drain(10)
        ok(eof, "b sees its connection closed")
        b.close()
        expect(h, "CHECK s %d" % t, "OK n=1 kind=conn ttl_ms=-",
               "the holder is untouched")


if __name__ == "__main__":
    run(test_max_line_default, test_max_line_custom,
        test_one_mib_without_newline, test_flood_is_not_swallowed,
        test_max_output, test_listing_over_max_output_reaches_a_reader,
        test_slow_senders_are_closed, test_idle_and_auth_timeouts,
        test_maxclients, test_max_semaphores,
        test_backlog_behind_wait)
