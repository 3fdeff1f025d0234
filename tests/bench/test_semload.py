#!/usr/bin/env python3
"""bench semload: the C load generator measures what it says, on runs of
a fraction of a second (no figure is checked against a speed).

Against a real semd: the closed loop ACQUIRE/RELEASE counts pairs that
semd's own STATS confirm, never sees more grants held at once than the
capacity (grant read -> RELEASE sent, a lower bound of what semd holds)
and sees the capacity reached when permits are held for a while, measures
the hand-off only when clients contend; the pipelined TRY/RELEASE mode;
connections that never got a permit counted as starved; RSS read from
--rss-pid; a bad CREATE or a missing server exits 1 with a
message. Against a private redis-server: PING, and the Lua sorted-set
semaphore (refusals and retries under contention, never more holders
than the limit, in the loop or in the ZSET).
"""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403
from redistest import free_port  # noqa: E402

SEMLOAD = os.environ.get("SEMLOAD") or os.path.join(
    os.environ.get("SEMD_BUILDDIR") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir),
    "tests", "bench", "semload")

QUICK = ["--warmup", "0.1", "--duration", "0.4"]


def semload(*args):
    """Run semload; returns (status, the JSON object or None, stderr)."""
    p = subprocess.run([SEMLOAD] + QUICK + [str(a) for a in args],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    out = p.stdout.decode()
    err = p.stderr.decode()
    res = None
    for ln in out.splitlines():
        if ln.startswith("{"):
            try:
                res = json.loads(ln)
            except ValueError:
                pass
    return p.returncode, res, err


def grants_total(d):
    c = d.connect()
    v = int(c.stats()["grants_total"])
    c.close()
    return v


def ran(status, res, err, desc):
    return ok(status == 0 and res is not None, desc,
              "status %s, stderr: %s" % (status, err.strip()[-500:]))


def test_binary():
    ok(os.access(SEMLOAD, os.X_OK), "semload is built (%s)" % SEMLOAD)


def test_semd_closed_loop():
    with start_semd() as d:
        before = grants_total(d)
        st, res, err = semload("-p", d.port, "-c", 8, "-l", 3,
                               "--hold-ms", 2, "-s", "held", "semd")
        if not ran(st, res, err, "semload semd: 8 connections, capacity 3, "
                   "hold 2 ms"):
            return
        eq((res["target"], res["mode"], res["conns"], res["limit"]),
           ("semd", "acquire", 8, 3), "the JSON line names the run")
        ok(res["pairs"] > 0 and res["pairs_per_s"] > 0,
           "pairs were counted", res)
        ok(grants_total(d) - before >= res["pairs"],
           "semd's grants_total covers the pairs semload counted",
           "%d grants, %d pairs" % (grants_total(d) - before, res["pairs"]))
        eq(res["max_held"], 3, "with permits held 2 ms, 3 grants were held "
           "at once, and never more than the capacity")
        ok(res["handoff_n"] > 0 and res["handoff_p50_us"] > 0 and
           res["handoff_p99_us"] >= res["handoff_p50_us"],
           "the hand-off is measured when clients contend", res)
        ok(res["acquire_p50_us"] <= res["acquire_p99_us"] <=
           res["acquire_p999_us"], "acquire percentiles are ordered", res)
        ok("pairs/s" in err and "hand-off p50" in err,
           "a human line on stderr", err)

        st, res, err = semload("-p", d.port, "-c", 4, "-l", 10, "-s",
                               "free", "semd")
        if ran(st, res, err, "semload semd: 4 connections, capacity 10"):
            ok("handoff_n" not in res, "no hand-off without contention",
               res)
            ok(res["max_held"] <= 4, "at most one grant per connection",
               res)


def test_semd_starved():
    with start_semd("--semaphore", "one", "1") as d:
        holder = d.connect()
        tok = holder.cmd("ACQUIRE one")
        ok(tok.startswith("OK "), "the test holds the only permit", tok)
        st, res, err = semload("-p", d.port, "-c", 3, "-l", 1, "-s", "one",
                               "--no-create", "semd")
        if ran(st, res, err, "semload semd on a semaphore held elsewhere"):
            eq((res["pairs"], res["starved"], res["acquire_n"]), (0, 3, 0),
               "no pair, 3 connections starved through the window")
        holder.close()


def test_semd_pipelined():
    with start_semd() as d:
        before = grants_total(d)
        st, res, err = semload("-p", d.port, "-c", 4, "-P", 8, "-l", 1000,
                               "-s", "pipe", "--rss-pid", d.pid, "semd")
        if not ran(st, res, err, "semload semd --pipeline 8"):
            return
        eq(res["mode"], "try-pipelined", "mode try-pipelined")
        ok(res["pairs"] > 0 and res["refusals"] == 0,
           "pairs counted, no TRY refused below the capacity", res)
        ok(grants_total(d) - before >= res["pairs"],
           "semd's grants_total covers the pipelined pairs")
        ok(res.get("rss_before_kb", 0) > 0 and
           res.get("rss_ready_kb", 0) > 0 and "rss_per_conn_b" in res,
           "--rss-pid reports the server's RSS", res)

        st, res, err = semload("-p", d.port, "-c", 4, "-P", 4, "-l", 2,
                               "-s", "small", "semd")
        if ran(st, res, err, "semload semd --pipeline 4 on capacity 2"):
            ok(res["refusals"] > 0 and res["attempts"] > res["pairs"],
               "TRY answered TIMEOUT is counted as a refusal and sent "
               "again", res)


def test_semd_errors():
    with start_semd("--semaphore", "fixed", "5") as d:
        st, res, err = semload("-p", d.port, "-l", 3, "-s", "fixed", "semd")
        ok(st == 1 and res is None and "ERR EXISTS" in err,
           "a CREATE refused (ERR EXISTS) exits 1 and says why", err)
        st, res, err = semload("-p", d.port, "-l", 6, "-s", "fixed",
                               "--no-create", "-c", 3, "semd")
        ran(st, res, err, "--no-create uses the existing semaphore")
    port = free_port()
    st, res, err = semload("-p", port, "semd")
    ok(st == 1 and res is None and "connect" in err,
       "no server: exit 1 with a message", err)
    st, res, err = semload("-p", port, "-P", 2, "lua")
    ok(st == 1 and "--pipeline is for the semd target" in err,
       "--pipeline is refused for the Redis targets", err)


def test_redis_targets():
    with start_redis(fsync="everysec") as r:
        st, res, err = semload("-p", r.port, "-c", 5, "ping")
        if ran(st, res, err, "semload ping"):
            ok(res["ops"] > 0 and res["lat_p50_us"] > 0,
               "PINGs counted, latency measured", res)
        st, res, err = semload("-p", r.port, "-c", 6, "-l", 2, "-r", 1,
                               "--hold-ms", 2, "-s", "lsem", "lua")
        if not ran(st, res, err, "semload lua: 6 connections, limit 2, "
                   "retry 1 ms, hold 2 ms"):
            return
        ok(res["pairs"] > 0, "Lua pairs counted", res)
        ok(res["refusals"] > 0 and res["attempts"] > res["pairs"],
           "contending clients are refused and retry", res)
        ok(0 <= res["starved"] <= 4, "starved is counted (at most the 4 "
           "clients that cannot hold)", res)
        eq(res["max_held"], 2, "the Lua semaphore held 2 at once, never "
           "more than its limit")
        ok(res["handoff_n"] > 0, "the hand-off is measured", res)
        eq(res["retry_ms"], 1, "the retry pause is in the JSON line")
        n = r.cmd("ZCARD", "lsem")
        ok(n <= 2, "the ZSET holds at most limit holders", "ZCARD %s" % n)
        # a second run on the same key starts from an empty set
        st, res, err = semload("-p", r.port, "-c", 2, "-l", 2, "-s", "lsem",
                               "-r", 0, "lua")
        if ran(st, res, err, "semload lua on a key left by a killed run"):
            eq(res["refusals"], 0, "the key was emptied before the run")


run(test_binary, test_semd_closed_loop, test_semd_starved,
    test_semd_pipelined,
    test_semd_errors, test_redis_targets, time_limit=120)
