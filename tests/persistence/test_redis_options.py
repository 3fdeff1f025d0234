#!/usr/bin/env python3
"""The Redis connection settings end to end: `redis unix:PATH`,
`redis-password`, `redis-db` and `redis-prefix`. Keys land in that
database under that prefix only, grants survive kill -9 through them, and
a wrong password keeps semd from listening without ever being logged."""
import os
import tempfile
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403

PASSWORD = "rEd1s-Pa55-QUUX"


def authed(r, db):
    """A RESP connection to r, authenticated and on database db."""
    c = r.connect()
    eq(c.cmd("AUTH", PASSWORD), "OK", "AUTH to the test redis")
    eq(c.cmd("SELECT", str(db)), "OK", "SELECT %d" % db)
    return c


def redis_with_password(sock):
    r = start_redis(extra=["--unixsocket", sock, "--unixsocketperm", "700"])
    # Set after start: the harness's own PING must not need it.
    eq(r.cmd("CONFIG", "SET", "requirepass", PASSWORD), "OK",
       "requirepass set on the test redis")
    return r


def test_unix_password_db_prefix():
    sock = os.path.join(tempfile.mkdtemp(prefix="semd-redis-sock."),
                        "redis.sock")
    with redis_with_password(sock) as r:
        p = PSemd(r, ["--semaphore", "s", "2"], start=False)
        p.redis_args = ["--redis", "unix:" + sock, "--redis-password",
                        PASSWORD, "--redis-db", "3", "--redis-prefix",
                        "app1:", "--reclaim-grace", "2s"]
        p.start()
        c = p.connect()
        t = token_of(c, "ACQUIRE s LEASE 60000")
        ok(t is not None, "a lease is granted through redis unix:PATH")
        db3, db0 = authed(r, 3), authed(r, 0)
        ok(wait_until(lambda: db3.cmd("HGET", "app1:{s}:grants",
                                      str(t)) is not None, 5),
           "the grant is in database 3 under the prefix app1:")
        eq(db3.cmd("SISMEMBER", "app1:sems", "s"), 1,
           "the semaphore is in app1:sems")
        eq(db0.cmd("KEYS", "*"), [], "database 0 holds nothing of semd")
        eq(db3.cmd("EXISTS", "semd:tokens"), 0,
           "nothing under the default prefix either")
        st = stats_of(c)
        eq(st.get("persistence"), "ok", "STATS persistence=ok")

        p.restart()
        c = p.connect()
        eq(sorted(holders(c, "s")), [t], "after kill -9 the lease is back "
           "through the same settings")
        ok(PASSWORD not in p.d.log_text(), "the redis password is never "
           "logged")
        p.stop()


def test_wrong_password():
    sock = os.path.join(tempfile.mkdtemp(prefix="semd-redis-sock."),
                        "redis.sock")
    with redis_with_password(sock) as r:
        p = PSemd(r, [], start=False)
        p.redis_args = ["--redis", "unix:" + sock, "--redis-password",
                        "not-" + PASSWORD]
        p.start(wait_ready=False)
        ok(wait_until(lambda: "cannot load" in p.d.log_text(), 10),
           "a wrong redis-password is reported at start-up",
           p.d.log_text()[-500:])
        time.sleep(1.5)
        ok("listening on" not in p.d.log_text(), "...and semd does not "
           "listen while it cannot load its state")
        ok(PASSWORD not in p.d.log_text(), "...nor log the password")
        eq(p.stop(), 0, "semd waiting for redis exits 0 on SIGTERM")


if __name__ == "__main__":
    run(test_unix_password_db_prefix, test_wrong_password, time_limit=90)
