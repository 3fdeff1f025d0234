#!/usr/bin/env python3
"""semd-cli run guards the whole job, as timeout(1) does: CMD runs in a
process group of its own, and a lost permit (REVOKE) stops the group,
grandchildren included, with SIGKILL after --kill-after for those that
ignore SIGTERM; and a lease taken with --lease is kept by run's watcher
after semd-cli is killed with SIGKILL, while CMD runs, then released."""
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


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def read_pid(path, timeout=10):
    """The pid CMD wrote to path (it started its grandchild)."""
    ok(wait_until(lambda: os.path.exists(path) and
                  open(path).read().strip().isdigit(), timeout),
       "CMD started its grandchild")
    try:
        return int(open(path).read().strip())
    except (OSError, ValueError):
        return None


def holder_token(c, sem):
    h = c.listing("HOLDERS %s" % sem)
    return int(h[0]["token"]) if h else None


def revoked_group(extra_sh, kill_after, what):
    """run a job whose shell starts a grandchild; REVOKE its permit; the
    grandchild must be gone afterwards. Returns run's exit status."""
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    pidfile = os.path.join(tmp, "grandchild")
    with start_semd("--semaphore", "jobs", "1") as d:
        c = d.connect()
        script = "%s sleep 1000 & echo $! > %s; wait" % (extra_sh, pidfile)
        p = spawn(d.port, "run", "jobs", "--kill-after", kill_after, "--",
                  "sh", "-c", script)
        gc = read_pid(pidfile)
        tok = holder_token(c, "jobs")
        ok(tok is not None, "%s: run holds the permit" % what)
        expect(c, "REVOKE jobs %d" % tok, "OK")
        out, err = p.communicate(timeout=30)
        no_sanitizer_report(err.decode(), "run")
        eq(p.returncode, 76, "%s: run exits 76 (the permit was lost)" %
           what)
        ok(gc is not None and wait_until(lambda: not alive(gc), 10),
           "%s: the grandchild (pid %s) was stopped with the group" %
           (what, gc), err.decode())
        if gc is not None and alive(gc):
            os.kill(gc, signal.SIGKILL)
        return p.returncode


def test_group_stopped_on_loss():
    revoked_group("", "1", "grandchild that obeys SIGTERM")


def test_group_killed_after():
    # The shell and its child ignore SIGTERM: --kill-after's SIGKILL
    # reaches the whole group.
    revoked_group("trap '' TERM;", "500ms",
                  "grandchild that ignores SIGTERM")


def test_lease_kept_after_kill9():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    started = os.path.join(tmp, "started")
    done = os.path.join(tmp, "done")
    with start_semd("--semaphore", "jobs", "1") as d:
        c = d.connect()
        # CMD runs 3 leases' worth (lease 2 s), past semd-cli's death.
        p = spawn(d.port, "run", "jobs", "--lease", "2", "--", "sh", "-c",
                  "touch %s; sleep 6; touch %s" % (started, done))
        ok(wait_until(lambda: os.path.exists(started), 10), "CMD started")
        tok = holder_token(c, "jobs")
        ok(tok is not None, "run holds a lease")
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        t_kill = time.monotonic()
        # Past two lease lengths after the kill, CMD still runs and the
        # lease is still held: the watcher refreshes it.
        ok(wait_until(lambda: time.monotonic() - t_kill >= 4.0 or
                      os.path.exists(done), 8), "time passes")
        if not os.path.exists(done):
            eq(holder_token(c, "jobs"), tok, "4 s (two leases) after "
               "kill -9 of semd-cli, while CMD runs, the lease is held")
        else:
            note("CMD ended early (a loaded machine): the held-lease "
                 "check is skipped this time")
        ok(wait_until(lambda: os.path.exists(done), 15), "CMD ends")
        ok(wait_until(lambda: holder_token(c, "jobs") is None, 10),
           "after CMD ends, the watcher releases the lease")
        st = c.stats()
        ok(int(st["releases"]) >= 1 and int(st["expired"]) == 0,
           "by RELEASE, not by expiry (releases=%s expired=%s)" %
           (st["releases"], st["expired"]))


run(test_group_stopped_on_loss, test_group_killed_after,
    test_lease_kept_after_kill9)
