#!/usr/bin/env python3
"""semd-cli run SEM -- CMD: it keeps CMD's exit status, forwards signals,
releases on every way out (CMD's end, SIGTERM to semd-cli; after SIGKILL
of semd-cli, when CMD ends),
and three jobs through a capacity-1 semaphore run one at a time, in the
order they arrived."""
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403


def spawn(port, *args):
    return subprocess.Popen(cli_argv(port, *args), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(p, what):
    out, err = p.communicate(timeout=30)
    no_sanitizer_report(err.decode(), what)
    return p.returncode, out.decode(), err.decode()


def test_exit_status():
    with start_semd("--semaphore", "one", "1") as d:
        c = d.connect()
        eq(cli(d.port, "run", "one", "--", "sh", "-c", "exit 7")[0], 7,
           "run keeps CMD's exit status (7)")
        eq(cli(d.port, "run", "one", "--", "true")[0], 0, "and 0")
        rc, out, _ = cli(d.port, "run", "one", "--", "sh", "-c",
                         "echo out; kill -KILL $$")
        eq((rc, out), (137, "out\n"), "CMD killed by SIGKILL: 128+9, "
           "its output passes through")
        rc, out, err = cli(d.port, "run", "one", "--", "/nonexistent/cmd")
        eq(rc, 127, "a CMD that does not exist: 127")
        eq(c.info("one")["used"], "0", "every run released its permit")
        eq(c.stats()["releases"], "4", "by RELEASE, four times")
        rc, out, _ = cli(d.port, "run", "one", "-n", "1", "--timeout",
                         "5", "--", "sh", "-c",
                         "echo $SEMD_TEST_ENV", env={"SEMD_TEST_ENV": "x"})
        eq((rc, out), (0, "x\n"), "-n and --timeout; CMD gets the "
           "environment")


def test_not_granted():
    with start_semd("--semaphore", "one", "1") as d:
        c = d.connect()
        t = expect_token(c, "ACQUIRE one")
        marker = os.path.join(tempfile.mkdtemp(prefix="semdtest."), "ran")
        rc, out, err = cli(d.port, "run", "one", "--timeout", "100ms", "--",
                           "touch", marker)
        eq(rc, 75, "not granted within --timeout: exit 75")
        ok(not os.path.exists(marker), "and CMD did not run")
        expect(c, "RELEASE one %d" % t, "OK")
        rc, out, err = cli(free_port(), "run", "one", "--", "touch",
                           marker)
        eq(rc, 4, "semd not reachable: exit 4")
        ok(not os.path.exists(marker), "and CMD did not run")
        eq(cli(d.port, "run", "nosuch", "--", "true")[0], 3,
           "an unknown semaphore: exit 3")


def test_sigterm():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    got = os.path.join(tmp, "got")
    with start_semd("--semaphore", "one", "1") as d:
        c = d.connect()
        p = spawn(d.port, "run", "one", "--", "sh", "-c",
                  "trap 'echo TERM > %s; exit 3' TERM; echo ready; "
                  "while :; do sleep 0.05; done" % got)
        eq(p.stdout.readline(), b"ready\n", "CMD runs")
        eq(c.info("one")["used"], "1", "while it holds the permit")
        p.send_signal(signal.SIGTERM)
        rc, out, err = finish(p, "semd-cli run")
        eq(rc, 3, "SIGTERM to semd-cli reaches CMD, whose status (3) "
           "semd-cli exits with")
        ok(os.path.exists(got), "CMD's TERM trap ran")
        eq(c.info("one")["used"], "0", "and the permit was released")

        p = spawn(d.port, "run", "one", "--", "sh", "-c",
                  "echo ready; exec sleep 30")
        eq(p.stdout.readline(), b"ready\n", "a CMD without a trap runs")
        p.send_signal(signal.SIGTERM)
        rc, out, err = finish(p, "semd-cli run")
        eq(rc, 128 + signal.SIGTERM, "dies of SIGTERM: 143")
        eq(c.info("one")["used"], "0", "released")

        p = spawn(d.port, "run", "one", "--", "sh", "-c",
                  "trap 'echo USR1 >> %s' USR1; trap 'exit 0' TERM; "
                  "echo ready; while :; do sleep 0.05; done" % got)
        eq(p.stdout.readline(), b"ready\n", "CMD with a USR1 trap runs")
        p.send_signal(signal.SIGUSR1)
        ok(wait_until(lambda: "USR1" in open(got).read(), 10),
           "SIGUSR1 is forwarded")
        p.send_signal(signal.SIGTERM)
        eq(finish(p, "semd-cli run")[0], 0, "CMD's exit 0 after TERM")


def test_sigkill():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    pidfile = os.path.join(tmp, "pid")
    with start_semd("--semaphore", "one", "1") as d:
        c = d.connect()
        p = spawn(d.port, "run", "one", "--", "sh", "-c",
                  "echo $$ > %s; echo ready; exec sleep 30" % pidfile)
        eq(p.stdout.readline(), b"ready\n", "CMD runs")
        p.kill()
        p.wait()
        time.sleep(0.3)
        eq(c.info("one")["used"], "1", "semd-cli killed by SIGKILL: CMD "
           "still holds the connection, and the permit (as flock)")
        with open(pidfile) as f:
            os.kill(int(f.read()), signal.SIGKILL)
        ok(wait_until(lambda: c.info("one")["used"] == "0", 10),
           "CMD killed too: the connection closed, the permit is free")


def test_fifo_one_at_a_time():
    """Three runs through capacity 1, each started once the one before it
    holds or waits: they run one at a time in that order."""
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    log = os.path.join(tmp, "log")
    gate = os.path.join(tmp, "gate")
    with start_semd("--semaphore", "one", "1") as d:
        c = d.connect()
        jobs = []
        for i in (1, 2, 3):
            script = ("echo start %d >> %s; while [ ! -e %s ]; do "
                      "sleep 0.05; done; echo end %d >> %s" %
                      (i, log, gate, i, log))
            jobs.append(spawn(d.port, "run", "one", "--", "sh", "-c",
                              script))
            if i == 1:
                ok(wait_until(lambda: c.info("one")["used"] == "1", 10),
                   "job 1 holds the permit")
            else:
                ok(wait_until(lambda: c.info("one")["waiters"] ==
                              str(i - 1), 10), "job %d waits" % i)
        open(gate, "w").close()
        for i, p in enumerate(jobs, 1):
            eq(finish(p, "semd-cli run")[0], 0, "job %d exits 0" % i)
        with open(log) as f:
            eq(f.read().split("\n"), ["start 1", "end 1", "start 2",
                                      "end 2", "start 3", "end 3", ""],
               "one at a time, in arrival order")
        eq(c.info("one")["used"], "0", "all released")


run(test_exit_status, test_not_granted, test_sigterm, test_sigkill,
    test_fifo_one_at_a_time)
