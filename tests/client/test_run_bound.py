#!/usr/bin/env python3
"""Issue 16's "Done when" for `semd-cli run`: an owner and a standby semd
on one private Redis (both `standby yes`, so the deposed A waits as a
standby after SIGCONT), several `semd-cli -h A,B run` clients competing for
a capacity-1 semaphore, each command logging "start"/"end" with its
CLOCK_MONOTONIC time to one shared file. The owner is SIGSTOPped for
longer than owner-lease + reclaim-grace, so the standby takes over and
releases the permit the stopped owner's client held, then SIGCONTed. The
checker finds no two commands running at once: the holder's run stopped
its command within the bound (reclaim-grace after the send time of its
last answered PING, less a margin), before the standby could grant the
permit again. Once B owns the data, one more client (-h B,A) starts,
so that B grants the permit while A is still stopped (the clients that
were waiting on A stay stuck there until their I/O timeout or SIGCONT).

SEMD_SLOW=1 (make check-slow) stops the owner for 30 s with the default
owner-lease (3 s) and reclaim-grace (10 s) instead of 6 s with 1 s and
3 s."""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403
from redistest import start_redis, start_semd_redis, role_of  # noqa: E402

SLOW = os.environ.get("SEMD_SLOW") == "1"
LEASE_S, GRACE_S = (3.0, 10.0) if SLOW else (1.0, 3.0)
STOP_S = 30.0 if SLOW else LEASE_S + GRACE_S + 3.0
CLIENTS = 4
# Each command holds the permit this long: unless run stops it, the
# holder when A stops outlives B's takeover plus reclaim-grace.
HOLD_S = LEASE_S + GRACE_S + 3.0

# The guarded command: "start" once it runs, "end" when it ends or gets
# SIGTERM (run's way to stop it), each with its pid and monotonic time.
WORKER = r"""
import os, signal, sys, time
path, hold = sys.argv[1], float(sys.argv[2])
def out(word):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, ("%s %d %.6f\n" % (word, os.getpid(),
                                     time.monotonic())).encode())
    os.close(fd)
def term(sig, frame):
    out("end")
    os._exit(0)
signal.signal(signal.SIGTERM, term)
out("start")
time.sleep(hold)
out("end")
"""


def intervals(path):
    """{pid: [start, end or None]} from the shared file."""
    runs = {}
    if not os.path.exists(path):
        return runs
    with open(path) as f:
        for ln in f:
            w = ln.split()
            if len(w) != 3:
                continue
            r = runs.setdefault(int(w[1]), [None, None])
            r[0 if w[0] == "start" else 1] = float(w[2])
    return runs


def running(path):
    """Commands started and not ended."""
    return [p for p, (s, e) in intervals(path).items()
            if s is not None and e is None]


def overlaps(runs, until):
    """Pairs of commands that ran at once (a command without "end"
    counts as running until `until`)."""
    spans = sorted((s, e if e is not None else until, p)
                   for p, (s, e) in runs.items() if s is not None)
    bad = []
    for i in range(1, len(spans)):
        for j in range(i):
            if spans[j][1] > spans[i][0]:
                bad.append((spans[j], spans[i]))
    return bad


class Client(threading.Thread):
    """Runs `semd-cli -h HOSTS run --timeout 1s one -- WORKER` again and
    again until stopped; counts the exit statuses."""

    def __init__(self, hosts, worker, path, tmp, i):
        threading.Thread.__init__(self, daemon=True)
        self.hosts, self.worker, self.path = hosts, worker, path
        self.errpath = os.path.join(tmp, "client%d.err" % i)
        self.stopping = False
        self.statuses = {}

    def run(self):
        with open(self.errpath, "ab") as errf:
            while not self.stopping:
                argv = cli_argv(None, "-h", self.hosts, "run", "--timeout",
                                "1s", "one", "--", sys.executable,
                                self.worker, self.path, str(HOLD_S))
                try:
                    p = subprocess.run(argv, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL,
                                       stderr=errf, timeout=STOP_S + 60,
                                       env=client_env())
                    st = p.returncode
                except subprocess.TimeoutExpired:
                    st = "hung"
                self.statuses[st] = self.statuses.get(st, 0) + 1
                if st not in (0, 75, 76):
                    time.sleep(0.1)   # refused or unreachable: not a spin

    def stderr(self):
        with open(self.errpath, errors="replace") as f:
            return f.read()


def test_owner_stopped():
    tmp = tempfile.mkdtemp(prefix="semdtest.runbound.")
    worker = os.path.join(tmp, "worker.py")
    with open(worker, "w") as f:
        f.write(WORKER)
    path = os.path.join(tmp, "log")
    with start_redis() as r:
        args = ("--semaphore", "one", "1", "--owner-lease",
                "%gs" % LEASE_S, "--standby", "yes")
        a = start_semd_redis(r, *args, grace="%gs" % GRACE_S)
        eq(role_of(a.connect())["role"], "owner", "A is the owner")
        b = start_semd_redis(r, *args, grace="%gs" % GRACE_S)
        eq(role_of(b.connect())["role"], "standby", "B is A's standby")
        ha = "127.0.0.1:%d" % a.port
        hb = "127.0.0.1:%d" % b.port
        clients = [Client("%s,%s" % ((ha, hb) if i % 2 == 0 else (hb, ha)),
                          worker, path, tmp, i) for i in range(CLIENTS)]
        for c in clients:
            c.start()
        stopped = False
        try:
            ok(wait_until(lambda: len(intervals(path)) >= 2, 30),
               "the clients take turns on A")
            ok(wait_until(lambda: [p for p in running(path)
                                   if intervals(path)[p][0] <
                                   time.monotonic() - 0.5], HOLD_S + 10),
               "a command holds the permit (for half a second)")
            holder = running(path)
            os.kill(a.d.pid, signal.SIGSTOP)
            stopped = True
            t_stop = time.monotonic()
            note("A stopped at %.3f with %r running; stopped for %.0f s "
                 "(owner-lease %.0f s, reclaim-grace %.0f s)" %
                 (t_stop, holder, STOP_S, LEASE_S, GRACE_S))
            ok(wait_until(lambda: role_of(b.connect())["role"] == "owner",
                          LEASE_S + 5), "B takes over while A is stopped")
            late = Client("%s,%s" % (hb, ha), worker, path, tmp, CLIENTS)
            late.start()
            clients.append(late)
            time.sleep(max(0.0, t_stop + STOP_S - time.monotonic()))
            os.kill(a.d.pid, signal.SIGCONT)
            stopped = False
            t_cont = time.monotonic()
            ok(wait_until(lambda: any(s is not None and s > t_cont
                                      for s, e in intervals(path).values()),
                          60), "commands run again after SIGCONT")
            time.sleep(2)
        finally:
            if stopped:
                os.kill(a.d.pid, signal.SIGCONT)
            for c in clients:
                c.stopping = True
            for c in clients:
                c.join(STOP_S + 90)
        t_end = time.monotonic()
        runs = intervals(path)
        ended = [p for p in holder if runs.get(p, [None, None])[1]]
        if ended:
            took = runs[ended[0]][1] - t_stop
            note("the holder's command ended %.3f s after SIGSTOP "
                 "(reclaim-grace %.1f s)" % (took, GRACE_S))
            ok(took < GRACE_S, "the holder's command ended before "
               "reclaim-grace after the stop: %.3f s" % took)
        else:
            ok(False, "the holder's command ended", repr(runs.get(
                holder[0] if holder else None)))
        during = [s for s, e in runs.values()
                  if s is not None and t_stop < s < t_cont]
        note("%d commands in all, %d started while A was stopped (on B); "
             "exit statuses %r" % (len(runs), len(during),
                                   [c.statuses for c in clients]))
        ok(during, "B granted the permit while A was stopped (after "
           "reclaim-grace): %d commands" % len(during))
        ok(any(c.statuses.get(76) for c in clients),
           "the holder's run exited 76: the permit was lost")
        bad = overlaps(runs, t_end)
        ok(not bad, "no two commands ran at once (%d commands)" % len(runs),
           "overlapping (start, end, pid): %r" % bad[:5])
        if bad:
            for c in clients:
                note(c.stderr()[-3000:])
        for c in clients:
            no_sanitizer_report(c.stderr(), "semd-cli run")
        b.stop()
        a.stop()


def test_owner_dead_unreachable():
    """The owner dies (kill -9) and nothing else answers: run gives the
    permit up when its bound passes (reclaim-grace after its last
    answered PING, less the margin), no longer after a fixed 15 s, so
    its command is dead before a standby could have re-granted it."""
    tmp = tempfile.mkdtemp(prefix="semdtest.runbound.")
    worker = os.path.join(tmp, "worker.py")
    with open(worker, "w") as f:
        f.write(WORKER)
    path = os.path.join(tmp, "log")
    errpath = os.path.join(tmp, "run.err")
    with start_redis() as r:
        a = start_semd_redis(r, "--semaphore", "one", "1", "--owner-lease",
                             "%gs" % LEASE_S, grace="%gs" % GRACE_S)
        with open(errpath, "wb") as errf:
            p = subprocess.Popen(cli_argv(a.port, "run", "one", "--",
                                          sys.executable, worker, path,
                                          "600"),
                                 stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=errf,
                                 env=client_env())
        try:
            ok(wait_until(lambda: running(path), 15), "run's command runs")
            time.sleep(0.5)
            a.kill9()
            t_kill = time.monotonic()
            st = p.wait(timeout=GRACE_S + 30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        runs = intervals(path)
        end = [e for s, e in runs.values() if e is not None]
        ok(end, "the command ended", repr(runs))
        if end:
            took = end[0] - t_kill
            note("the command ended %.3f s after the owner's kill -9 "
                 "(reclaim-grace %.1f s)" % (took, GRACE_S))
            margin = max(GRACE_S / 5, min(0.5, GRACE_S / 2))
            low = GRACE_S - margin - (GRACE_S - margin) / 4 - 0.2
            ok(low <= took < GRACE_S, "... within [bound - one PING "
               "interval, reclaim-grace) of the kill: %.3f s in "
               "[%.2f, %.1f)" % (took, low, GRACE_S))
        eq(st, 76, "run exits 76: the permit was lost")
        with open(errpath, errors="replace") as f:
            err = f.read()
        note(err)
        ok("out of reach until the bound passed" in err,
           "run says semd stayed out of reach until the bound passed")
        no_sanitizer_report(err, "semd-cli run")


run(test_owner_stopped, test_owner_dead_unreachable,
    time_limit=int(STOP_S) + 180)
