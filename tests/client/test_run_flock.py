#!/usr/bin/env python3
"""semd-cli run as safe as flock(1): the command inherits the connection
that holds the permit, so kill -9 of semd-cli leaves the command running
and the permit held (HOLDERS shows who) until the command ends; a permit
lost while the command runs (REVOKE, KILL of its connection, a lease
that expired) is noticed at once through WATCH: the command gets
SIGTERM (SIGKILL after --kill-after) and run exits 76; --on-loss
ignore; the permit in the command's environment; exit statuses that do
not collide (-E, 75); durations in seconds; --name and SEMD_NAME."""
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403


def spawn(port, *args, env=None, stderr=subprocess.PIPE):
    return subprocess.Popen(cli_argv(port, *args), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=stderr,
                            env=client_env(env))


def finish(p, what, timeout=30):
    out, err = p.communicate(timeout=timeout)
    err = err.decode() if err is not None else ""
    no_sanitizer_report(err, what)
    return p.returncode, out.decode(), err


def holders(c, sem="one"):
    return c.listing("HOLDERS %s" % sem)


def watchers(c):
    """The CLIENTS lines of connections whose last request was WATCH (run's
    watcher process)."""
    return [x for x in c.listing("CLIENTS") if x["cmd"] == "watch"]


def watching(c):
    """run's watcher is blocked in its WATCH of the permit."""
    return any(x["waiting"] == "1" for x in watchers(c))


# A command that says "ready", records SIGTERM in a file and exits 9.
TRAPPED = ("trap 'echo TERM > %s; exit 9' TERM; echo ready; "
           "while :; do sleep 0.05; done")


def test_kill9_keeps_permit():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    gate = os.path.join(tmp, "gate")
    done = os.path.join(tmp, "done")
    with start_semd("--semaphore", "one", "1") as d:
        c = d.connect()
        p = spawn(d.port, "run", "one", "--name", "nightly@hostA:1", "--",
                  "sh", "-c", "echo ready; while [ ! -e %s ]; do sleep "
                  "0.05; done; touch %s" % (gate, done),
                  stderr=subprocess.DEVNULL)
        eq(p.stdout.readline(), b"ready\n", "CMD runs")
        h = holders(c)
        ok(len(h) == 1 and h[0]["name"] == "nightly@hostA:1" and
           h[0]["addr"].startswith("127.0.0.1:") and h[0]["kind"] == "conn",
           "HOLDERS shows the permit with run's name and address", h)
        p.kill()
        p.wait()
        time.sleep(0.5)
        h2 = holders(c)
        ok(len(h2) == 1 and h2[0]["token"] == h[0]["token"] and
           h2[0]["name"] == "nightly@hostA:1" and
           h2[0]["addr"] == h[0]["addr"],
           "after kill -9 of semd-cli the permit is still held, by the "
           "same connection (CMD inherited it)", h2)
        eq(c.cmd("TRY one"), "TIMEOUT", "nobody else gets it meanwhile")
        ok(not os.path.exists(done), "CMD is still running")
        open(gate, "w").close()
        ok(wait_until(lambda: os.path.exists(done), 10), "CMD ends")
        ok(wait_until(lambda: holders(c) == [], 10),
           "once CMD ended, semd released the permit")
        eq(c.info("one")["used"], "0", "used=0")


def test_revoke_after_kill9_stops_cmd():
    """Issue 8's "Done when": kill -9 of semd-cli, then REVOKE: the
    command still stops at once (run's watcher outlives semd-cli)."""
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    got = os.path.join(tmp, "got")
    with start_semd("--semaphore", "one", "1") as d:
        c = d.connect()
        p = spawn(d.port, "run", "one", "--", "sh", "-c", TRAPPED % got,
                  stderr=subprocess.DEVNULL)
        eq(p.stdout.readline(), b"ready\n", "CMD runs")
        ok(wait_until(lambda: watching(c), 10),
           "run's watcher WATCHes the permit")
        token = holders(c)[0]["token"]
        p.kill()
        p.wait()
        time.sleep(0.3)
        eq([h["token"] for h in holders(c)], [token], "after kill -9 of "
           "semd-cli the permit is held (CMD inherited the connection)")
        start = time.monotonic()
        expect(c, "REVOKE one %s" % token, "OK")
        ok(wait_until(lambda: os.path.exists(got), 10),
           "REVOKE stops CMD (SIGTERM) although semd-cli is gone")
        note("SIGTERM reached CMD %.0f ms after REVOKE" %
             ((time.monotonic() - start) * 1000))
        ok(wait_until(lambda: watchers(c) == [], 10),
           "and the watcher is gone too")


def test_watcher_ends_with_cmd_after_kill9():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    gate = os.path.join(tmp, "gate")
    with start_semd("--semaphore", "one", "1") as d:
        c = d.connect()
        p = spawn(d.port, "run", "one", "--", "sh", "-c", "echo ready; "
                  "while [ ! -e %s ]; do sleep 0.05; done" % gate,
                  stderr=subprocess.DEVNULL)
        eq(p.stdout.readline(), b"ready\n", "CMD runs")
        ok(wait_until(lambda: watchers(c) != [], 10),
           "run's watcher WATCHes the permit")
        p.kill()
        p.wait()
        open(gate, "w").close()
        ok(wait_until(lambda: holders(c) == [] and watchers(c) == [], 10),
           "after kill -9 of semd-cli, CMD's end releases the permit and "
           "the orphaned watcher leaves with it")


def test_revoke_stops_cmd():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    got = os.path.join(tmp, "got")
    with start_semd("--semaphore", "one", "1") as d:
        c = d.connect()
        p = spawn(d.port, "run", "one", "--", "sh", "-c", TRAPPED % got)
        eq(p.stdout.readline(), b"ready\n", "CMD runs")
        token = holders(c)[0]["token"]
        # run's watcher (a process of its own) must be WATCHing for the
        # loss to be called "revoked"; before that it would learn it as
        # "not held", a loss all the same.
        ok(wait_until(lambda: watching(c), 10),
           "run's watcher WATCHes the permit")
        start = time.monotonic()
        expect(c, "REVOKE one %s" % token, "OK")
        ok(wait_until(lambda: os.path.exists(got), 10),
           "CMD gets SIGTERM after REVOKE")
        note("SIGTERM reached CMD %.0f ms after REVOKE" %
             ((time.monotonic() - start) * 1000))
        rc, out, err = finish(p, "semd-cli run")
        eq(rc, 76, "run exits 76: the permit was lost")
        ok("revoked" in err, "and says it was revoked", err)


def test_kill_conn_stops_cmd():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    got = os.path.join(tmp, "got")
    with start_semd("--semaphore", "one", "1") as d:
        c = d.connect()
        p = spawn(d.port, "run", "one", "--", "sh", "-c", TRAPPED % got)
        eq(p.stdout.readline(), b"ready\n", "CMD runs")
        owner = holders(c)[0]["owner"]
        expect(c, "KILL %s" % owner, "OK")
        ok(wait_until(lambda: os.path.exists(got), 10),
           "KILL of the holding connection: CMD gets SIGTERM")
        rc, out, err = finish(p, "semd-cli run")
        eq(rc, 76, "run exits 76")


def test_lease_lost():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    got = os.path.join(tmp, "got")
    with start_semd("--semaphore", "one", "1") as d:
        c = d.connect()
        p = spawn(d.port, "run", "one", "--lease", "1", "--", "sh", "-c",
                  TRAPPED % got)
        eq(p.stdout.readline(), b"ready\n", "CMD runs under a 1 s lease")
        time.sleep(2.5)
        h = holders(c)
        ok(len(h) == 1 and h[0]["kind"] == "lease",
           "the keeper keeps the lease beyond its length", h)
        expect(c, "REVOKE one %s" % h[0]["token"], "OK")
        ok(wait_until(lambda: os.path.exists(got), 10),
           "REVOKE of the lease: CMD gets SIGTERM")
        eq(finish(p, "semd-cli run")[0], 76, "run exits 76")

        # semd-cli paused past the lease's end: the lease expires, and
        # semd-cli notices as soon as it runs again.
        os.unlink(got)
        p = spawn(d.port, "run", "one", "--lease", "1", "--", "sh", "-c",
                  TRAPPED % got)
        eq(p.stdout.readline(), b"ready\n", "CMD runs under a 1 s lease")
        p.send_signal(signal.SIGSTOP)
        ok(wait_until(lambda: holders(c) == [], 10),
           "semd-cli stopped: nobody refreshes, the lease expires")
        ok(not os.path.exists(got), "CMD runs on while semd-cli is stopped")
        p.send_signal(signal.SIGCONT)
        ok(wait_until(lambda: os.path.exists(got), 10),
           "semd-cli continued: CMD gets SIGTERM")
        eq(finish(p, "semd-cli run")[0], 76, "run exits 76")
        eq(c.stats().get("expired"), "1", "semd: the lease expired")


def test_kill_after_and_ignore():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    mark = os.path.join(tmp, "mark")
    with start_semd("--semaphore", "one", "1") as d:
        c = d.connect()
        p = spawn(d.port, "run", "one", "--kill-after", "0.5", "--", "sh",
                  "-c", "trap '' TERM; echo ready; while :; do sleep 0.05;"
                  " done")
        eq(p.stdout.readline(), b"ready\n", "a CMD that ignores SIGTERM")
        expect(c, "REVOKE one %s" % holders(c)[0]["token"], "OK")
        start = time.monotonic()
        rc, out, err = finish(p, "semd-cli run")
        eq(rc, 76, "is killed after --kill-after 0.5 and run exits 76")
        ok("SIGKILL" in err, "run says it sent SIGKILL", err)
        note("run ended %.0f ms after REVOKE" %
             ((time.monotonic() - start) * 1000))

        p = spawn(d.port, "run", "one", "--on-loss", "ignore", "--", "sh",
                  "-c", "trap 'echo TERM > %s' TERM; echo ready; "
                  "while [ ! -e %s.go ]; do sleep 0.05; done; exit 0" %
                  (mark, mark))
        eq(p.stdout.readline(), b"ready\n", "CMD runs (--on-loss ignore)")
        expect(c, "REVOKE one %s" % holders(c)[0]["token"], "OK")
        time.sleep(1)
        ok(p.poll() is None and not os.path.exists(mark),
           "--on-loss ignore: CMD goes on, without SIGTERM")
        open(mark + ".go", "w").close()
        rc, out, err = finish(p, "semd-cli run")
        eq(rc, 76, "and run still exits 76 when it ends")
        ok("unguarded" in err, "saying CMD ran unguarded", err)


def test_environment():
    with start_semd("--semaphore", "two", "3") as d:
        c = d.connect()
        rc, out, err = cli(d.port, "run", "two", "-n", "2", "--", "sh", "-c",
                           "echo $SEMD_SEM $SEMD_TOKEN $SEMD_N",
                           env={"SEMD_TOKEN": "stale"})
        eq(rc, 0, "run exits 0")
        words = out.split()
        ok(len(words) == 3 and words[0] == "two" and words[2] == "2" and
           words[1].isdigit(), "CMD sees SEMD_SEM, SEMD_TOKEN, SEMD_N "
           "(its own, not the caller's stale SEMD_TOKEN)", out)
        t = expect_token(c, "TRY two")
        ok(int(words[1]) < int(t), "SEMD_TOKEN is the granted token")


def test_exit_statuses():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    marker = os.path.join(tmp, "ran")
    with start_semd("--semaphore", "one", "1") as d:
        c = d.connect()
        t = expect_token(c, "ACQUIRE one")
        rc, out, err = cli(d.port, "run", "one", "--timeout", "0.1", "--",
                           "touch", marker)
        eq(rc, 75, "not granted in time: 75 (EX_TEMPFAIL)")
        ok(not os.path.exists(marker), "and CMD did not run")
        eq(cli(d.port, "run", "one", "-E", "3", "--timeout", "0.1", "--",
               "true")[0], 3, "-E 3")
        eq(cli(d.port, "run", "one", "--conflict-exit-code=9", "--timeout",
               "100ms", "--", "true")[0], 9, "--conflict-exit-code=9")
        start = time.monotonic()
        rc = cli(d.port, "run", "one", "--timeout", "1", "--", "true")[0]
        took = time.monotonic() - start
        eq(rc, 75, "--timeout 1: not granted")
        note("--timeout 1 gave up after %.2f s" % took)
        ok(0.9 <= took < 10, "--timeout 1 means one second, as flock -w "
           "(%.2f s)" % took)
        expect(c, "RELEASE one %d" % t, "OK")
        eq(cli(d.port, "run", "one", "--", "sh", "-c", "exit 75")[0], 75,
           "CMD's own status passes through (75)")
        eq(cli(d.port, "run", "one", "--", "sh", "-c", "kill -TERM $$")[0],
           143, "CMD killed by SIGTERM: 128+15")
        eq(cli(d.port, "run", "nosuch", "--", "true")[0], 3,
           "semd refused (unknown semaphore): 3")
        eq(cli(free_port(), "run", "one", "--", "true")[0], 4,
           "semd not reachable: 4")
        for bad in (["--on-loss", "maybe"], ["-E", "256"],
                    ["--timeout", "5x"], ["--kill-after", "-1"],
                    ["--name", "two words"]):
            eq(cli(d.port, "run", "one", *bad, "--", "true")[0], 2,
               "usage error: %s" % " ".join(bad))
        eq(c.info("one")["used"], "0", "nothing left held")


def test_names():
    with start_semd("--semaphore", "one", "1") as d:
        c = d.connect()
        p = spawn(d.port, "run", "one", "--", "sh", "-c",
                  "echo ready; exec sleep 30", stderr=subprocess.DEVNULL)
        eq(p.stdout.readline(), b"ready\n", "CMD runs")
        name = holders(c)[0]["name"]
        match(name, r"semd-cli@[^:]+:%d" % p.pid,
              "the default name is semd-cli@<hostname>:<pid>")
        clients = []

        def watched():
            clients[:] = watchers(c)
            return any(x["name"] == name and x["waiting"] == "1"
                       for x in clients)
        # The watcher is a process of its own: it may connect after CMD
        # has started.
        ok(wait_until(watched, 10), "its watcher WATCHes the permit, under "
           "the same name", clients)
        p.terminate()
        eq(finish(p, "semd-cli run")[0], 143, "SIGTERM ends it: 143")
        p = spawn(d.port, "run", "one", "--", "sh", "-c",
                  "echo ready; exec sleep 30", env={"SEMD_NAME": "from-env"},
                  stderr=subprocess.DEVNULL)
        eq(p.stdout.readline(), b"ready\n", "CMD runs")
        eq(holders(c)[0]["name"], "from-env", "SEMD_NAME names it")
        p.terminate()
        finish(p, "semd-cli run")


run(test_kill9_keeps_permit, test_revoke_after_kill9_stops_cmd,
    test_watcher_ends_with_cmd_after_kill9, test_revoke_stops_cmd,
    test_kill_conn_stops_cmd, test_lease_lost, test_kill_after_and_ignore, test_environment,
    test_exit_statuses, test_names)
