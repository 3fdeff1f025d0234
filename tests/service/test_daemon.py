#!/usr/bin/env python3
"""daemonize yes with a pidfile and a logfile; a pidfile held by a live
semd refuses a second start; the pidfile is written before "ready"; log
lines without timestamp and pid when stderr is the journal
(JOURNAL_STREAM names it)."""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403
from semdtest import SEMD_BIN  # noqa: E402

TMP = tempfile.mkdtemp(prefix="semdtest.")
_daemons = []       # pids to kill whatever happens


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def kill_daemons():
    for pid in _daemons:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for us: it is not our child, so look at /proc.
    return "State:\tZ" not in read("/proc/%d/status" % pid)


def test_daemonize():
    pidf = os.path.join(TMP, "semd.pid")
    log = os.path.join(TMP, "semd.log")
    args = [SEMD_BIN, "--bind", "127.0.0.1", "--port", "0", "--daemonize",
            "yes", "--pidfile", pidf, "--logfile", log, "--semaphore", "s",
            "1"]
    try:
        t0 = time.monotonic()
        p = subprocess.run(args, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=30)
        eq(p.returncode, 0, "semd --daemonize yes returns 0 once started")
        ok(os.path.exists(pidf), "the pidfile exists when it returns")
        pid = int(read(pidf).strip() or "0")
        if pid:
            _daemons.append(pid)
        ok(pid > 0 and pid_alive(pid), "the pidfile names a live process",
           read(pidf))
        eq(p.stdout + p.stderr, b"", "the daemon leaves the terminal "
           "silent")
        ok(wait_until(lambda: "ready to accept" in read(log)),
           "the daemon logs to its logfile", read(log))
        ok("semd[%d]" % pid in read(log), "the logfile names the daemon's "
           "pid")
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", read(log))
        c = connect(int(m.group(1))) if m else None
        if c:
            expect(c, "INFO s", "OK name=s capacity=1 used=0 available=1 "
                   "holders=0 waiters=0", "the daemon serves")
        note("started in %.2f s" % (time.monotonic() - t0))

        # A second semd on the same pidfile refuses to start.
        p2 = subprocess.run(args[:1] + ["--port", "0", "--pidfile", pidf],
                            capture_output=True, timeout=30)
        eq(p2.returncode, 1, "a second semd with the same pidfile exits 1")
        ok(b"held by a running semd (pid %d)" % pid in p2.stderr,
           "and says which pid holds it", p2.stderr)
        eq(read(pidf).strip(), str(pid), "the pidfile is untouched")
        # The same with a logfile and daemonize yes: the reason must reach
        # the terminal too, not only the log (nginx's [emerg]).
        log2 = os.path.join(TMP, "semd2.log")
        p3 = subprocess.run(args[:1] + ["--port", "0", "--pidfile", pidf,
                                        "--logfile", log2, "--daemonize",
                                        "yes"],
                            stdin=subprocess.DEVNULL, capture_output=True,
                            timeout=30)
        ok(p3.returncode == 1 and b"semd: [emerg] pidfile" in p3.stderr and
           b"held by a running semd (pid %d)" % pid in p3.stderr and
           "held by a running semd" in read(log2),
           "with a logfile and daemonize yes: exit 1, the reason on stderr "
           "([emerg]) and in the log", (p3.returncode, p3.stderr))
        # A port in use shows too: semd detaches only once it listens.
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        p4 = subprocess.run([SEMD_BIN, "--bind", "127.0.0.1", "--port",
                             str(busy.getsockname()[1]), "--logfile", log2,
                             "--daemonize", "yes"],
                            stdin=subprocess.DEVNULL, capture_output=True,
                            timeout=30)
        busy.close()
        ok(p4.returncode == 1 and b"[emerg] cannot listen" in p4.stderr,
           "a port in use with daemonize yes: exit 1 saying so on stderr",
           (p4.returncode, p4.stderr))

        os.kill(pid, signal.SIGTERM)
        ok(wait_until(lambda: not pid_alive(pid)), "SIGTERM stops the "
           "daemon")
        ok(not os.path.exists(pidf), "its pidfile is removed")
        ok("bye" in read(log), "it logs its end")
        for m in ("AddressSanitizer", "runtime error:"):
            ok(m not in read(log), "no %s in the log" % m)
    finally:
        kill_daemons()


def test_stale_pidfile():
    pidf = os.path.join(TMP, "stale.pid")
    with open(pidf, "w") as f:
        f.write("%d\n" % os.getpid())   # a live pid, but no lock
    d = start_semd("--pidfile", pidf)
    eq(read(pidf).strip(), str(d.pid), "a pidfile nobody holds (kill -9, "
       "a reboot) is taken over")
    d.stop()


def test_pidfile_before_ready():
    """With persistence and no Redis, semd waits before it listens: the
    pidfile is there already."""
    pidf = os.path.join(TMP, "early.pid")
    port = free_port()
    d = start_semd("--pidfile", pidf, "--redis", "127.0.0.1:%d" % port,
                   wait_ready=False)
    ok(wait_until(lambda: os.path.exists(pidf) and read(pidf).strip() ==
                  str(d.pid)), "the pidfile is written while semd still "
       "waits for Redis", d.log_text())
    ok("ready to accept" not in d.log_text(), "semd is not ready yet")
    d.stop()


def test_journal_stream():
    errpath = os.path.join(TMP, "journal.err")
    errf = open(errpath, "wb")
    st = os.fstat(errf.fileno())
    env = dict(os.environ, JOURNAL_STREAM="%d:%d" % (st.st_dev, st.st_ino))
    p = subprocess.Popen([SEMD_BIN, "--bind", "127.0.0.1", "--port", "0"],
                         stdin=subprocess.DEVNULL, stdout=errf, stderr=errf,
                         env=env)
    try:
        ok(wait_until(lambda: "ready to accept" in read(errpath)),
           "semd starts", read(errpath))
    finally:
        p.send_signal(signal.SIGTERM)
        eq(p.wait(timeout=10), 0, "it exits 0 on SIGTERM")
        errf.close()
    lines = [ln for ln in read(errpath).splitlines() if ln]
    ok(lines and all(re.fullmatch(r"<[0-7]>(debug|info|notice|warn|error): .*",
                                  ln) for ln in lines),
       "stderr is the journal: '<N>level: text' lines, no timestamp or pid",
       lines[:3])

    # JOURNAL_STREAM naming another file (inherited): timestamps stay.
    env["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino + 1)
    d = start_semd(env=env)
    d.stop()
    ok(re.search(r"^\d{4}-\d\d-\d\dT\S+Z semd\[%d\] info: " % d.pid,
                 d.log_text(), re.M),
       "a JOURNAL_STREAM that is not our stderr changes nothing")


run(test_daemonize, test_stale_pidfile, test_pidfile_before_ready,
    test_journal_stream)
