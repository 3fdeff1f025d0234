#!/usr/bin/env python3
"""libsemc's 1.1 calls against a real semd: semc_name (and opts.name,
sent again on reconnect), semc_clients, semc_kill, name= and addr= in
HOLDERS and WAITERS; semc_watch for each reason; the lease keeper told of
a revoked lease through WATCH, long before its next refresh; the version
macros. The calls and their checks are in tests/client/semc_api.c."""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403


def test_who():
    with start_semd("--semaphore", "jobs", "2") as d:
        api("who", d.port)


def test_watch():
    with start_semd("--semaphore", "jobs", "1") as d:
        api("watch", d.port)
        st = d.connect().stats()
        eq(st.get("revoked"), "1", "semd: one grant revoked")
        eq(st.get("expired"), "1", "semd: one lease expired")


def test_watch_unclaimed():
    """unclaimed needs a restart with persistence: a bound permit not
    ATTACHed within reclaim-grace."""
    if not semd_supports("persistence"):
        note("this semd has no persistence: unclaimed not tried")
        return
    with Redis() as r:
        port = free_port()
        args = ("--bind", "127.0.0.1", "--port", str(port), "--semaphore",
                "jobs", "1", "--persistence", "sync", "--redis",
                "127.0.0.1:%d" % r.port, "--reclaim-grace", "1s")
        d = start_semd(*args, bind=None)
        c = d.connect()
        token = expect_token(c, "ACQUIRE jobs")
        d.proc.kill()
        d.proc.wait()
        d.stop(quiet=True)
        d = start_semd(*args, bind=None)
        try:
            api("watchone", port, token, "unclaimed")
        finally:
            d.stop()


def test_keeper_watch():
    with start_semd("--semaphore", "jobs", "1") as d:
        api("keeperwatch", d.port)


def test_version():
    api("version")


run(test_who, test_watch, test_watch_unclaimed, test_keeper_watch,
    test_version)
