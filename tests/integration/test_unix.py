#!/usr/bin/env python3
"""The Unix socket listener (--unixsocket): same protocol and state as
TCP, permissions, removed at shutdown."""
import os
import stat
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F403


def test_unix_socket():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    path = os.path.join(tmp, "semd.sock")
    d = start_semd("--unixsocket", path)
    ok(path in d.unix_paths, "the log says 'listening on unix:%s'" % path,
       repr(d.unix_paths))
    ok(os.path.exists(path) and stat.S_ISSOCK(os.stat(path).st_mode),
       "the socket file exists")
    eq(oct(os.stat(path).st_mode & 0o777), oct(0o700),
       "default unixsocketperm 0700")
    u = connect_unix(path)
    t = d.connect()
    expect(u, "PING", "OK PONG", "PING over the Unix socket")
    expect(u, "CREATE u 1", "OK", "CREATE over the Unix socket")
    expect(t, "INFO u", "OK name=u capacity=1 used=0 available=1 holders=0 "
           "waiters=0", "TCP sees what the Unix client created")
    tok = expect_token(u, "ACQUIRE u")
    expect_err(t, "RELEASE u %d" % tok, "NOTOWNER",
               "the Unix client's permit is bound to it")
    t.send("ACQUIRE u\r\n")
    ok(wait_until(lambda: u.info("u")["waiters"] == "1"),
       "a TCP client waits behind it")
    u.send("PING\r\n" * 5 + "INFO u\r\n")
    eq([info_v1(x) for x in u.lines(6)],
       ["OK PONG"] * 5 + ["OK name=u capacity=1 used=1 available=0 "
                          "holders=1 waiters=1"],
       "pipelining over the Unix socket")
    u.close()
    is_token(t.line(10), "closing the Unix client releases its permit: the "
             "TCP waiter is granted")
    hs = t.listing("HOLDERS u")
    ok(len(hs) == 1 and hs[0].get("owner", "").isdigit(),
       "HOLDERS owner is a connection id", repr(hs))
    u2 = connect_unix(path)
    expect(u2, "QUIT", "OK")
    ok(u2.expect_closed(5), "QUIT closes a Unix connection")
    u2.close()
    d.stop()
    ok(not os.path.exists(path), "the socket file is removed at shutdown")


def test_unix_socket_perm():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    path = os.path.join(tmp, "perm.sock")
    with start_semd("--unixsocket", path, "--unixsocketperm", "0770") as d:
        eq(oct(os.stat(path).st_mode & 0o777), oct(0o770),
           "--unixsocketperm 0770")
        with connect_unix(path) as u:
            expect(u, "PING", "OK PONG")


def test_unix_with_password():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    path = os.path.join(tmp, "pw.sock")
    with start_semd("--unixsocket", path, "--requirepass", "pw-123") as d:
        with connect_unix(path) as u:
            expect_err(u, "LIST", "AUTH", "requirepass applies to the Unix "
                       "socket too")
            expect(u, "AUTH pw-123", "OK")
            eq(u.listing("LIST"), [], "after AUTH, LIST works")


if __name__ == "__main__":
    run(test_unix_socket, test_unix_socket_perm, test_unix_with_password)
