#!/usr/bin/env python3
"""Smoke test: semd starts on a free port, answers PING, and shuts down
cleanly (exit 0) on SIGTERM and on SIGINT."""
import os
import re
import signal
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F401,F403


def test_start_ping_sigterm():
    with start_semd() as d:
        ok(d.port and d.port > 0, "a free port is picked and logged",
           "port %r" % d.port)
        c = d.connect()
        eq(c.cmd("PING"), "OK PONG", "PING -> OK PONG")
        ok(" info: " in d.log_text() and
           re.search(r"^\S+Z semd\[%d\] info: listening on "
                     r"127\.0\.0\.1:%d$" % (d.pid, d.port), d.log_text(),
                     re.M) is not None,
           "log line format: '<time>Z semd[PID] info: listening on ...'",
           d.log_text()[:400])
        eq(c.cmd("QUIT"), "OK", "QUIT -> OK")
        ok(c.expect_closed(5), "the connection is closed after QUIT")


def test_sigint():
    d = start_semd()
    c = d.connect()
    eq(c.cmd("PING"), "OK PONG", "PING -> OK PONG")
    d.stop(signal.SIGINT)          # checks exit status 0 and the log


def test_shutdown_with_clients():
    # Clients connected, one holding a permit, one waiting: SIGTERM still
    # gives a clean exit 0 and closes every connection.
    d = start_semd("--semaphore", "s", "1")
    a = connect(d.port)
    b = connect(d.port)
    is_token(a.cmd("ACQUIRE s"), "ACQUIRE s -> OK <token>")
    b.send("ACQUIRE s\r\n")
    wait_until(lambda: a.info("s")["waiters"] == "1", 10)
    d.stop(signal.SIGTERM)
    ok(a.expect_closed(5), "holder's connection closed at shutdown")
    ok(b.expect_closed(5), "waiter's connection closed at shutdown")


if __name__ == "__main__":
    run(test_start_ping_sigterm, test_sigint, test_shutdown_with_clients)
