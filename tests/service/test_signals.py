#!/usr/bin/env python3
"""Signals: SIGUSR1 and SIGHUP reopen a logfile that logrotate moved
away; SIGTERM and SIGINT stop semd with exit 0, tell every waiter
`ERR UNAVAILABLE shutting down`, remove the pidfile and flush the grants
to Redis; any other signal that would end a process is ignored with a log
line, or (SIGQUIT) logged before semd dies of it."""
import os
import signal
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403

TMP = tempfile.mkdtemp(prefix="semdtest.")


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def rotate_and_signal(sig, name):
    log = os.path.join(TMP, "%s.log" % name)
    with start_semd("--logfile", log, logfile=log) as d:
        ok("ready to accept connections" in read(log),
           "%s: semd logs to its logfile" % name)
        os.rename(log, log + ".1")
        os.kill(d.pid, sig)
        reopened = wait_until(lambda: "received %s" % name in read(log))
        ok(reopened, "%s: after mv semd.log semd.log.1, the line about %s "
           "goes to a new semd.log" % (name, name), read(log + ".1")[-300:])
        ok("received %s" % name not in read(log + ".1"),
           "%s: nothing more is written to the rotated file" % name)
        c = d.connect()
        expect(c, "PING", "OK PONG", "%s: semd still serves" % name)
        ok(d.alive(), "%s: semd is alive" % name)


def test_usr1_reopens_log():
    rotate_and_signal(signal.SIGUSR1, "SIGUSR1")


def test_hup_reopens_log():
    rotate_and_signal(signal.SIGHUP, "SIGHUP")


def test_other_signals_ignored_with_a_line():
    with start_semd() as d:
        rt = signal.SIGRTMAX - signal.SIGRTMIN
        for sig, name in ((signal.SIGUSR2, "SIGUSR2"),
                          (signal.SIGALRM, "SIGALRM"),
                          (signal.SIGPROF, "SIGPROF"),
                          (signal.SIGVTALRM, "SIGVTALRM"),
                          (signal.SIGIO, "SIGIO"), (signal.SIGPWR, "SIGPWR"),
                          (signal.SIGRTMIN, "SIGRTMIN+0"),
                          (signal.SIGRTMAX, "SIGRTMIN+%d" % rt)):
            os.kill(d.pid, sig)
            want = "received %s; ignored" % name
            ok(wait_until(lambda: want in d.log_text()),
               "%s: logged as ignored" % name, d.log_text()[-300:])
            ok(d.alive(), "%s does not end semd" % name)
        expect(d.connect(), "PING", "OK PONG", "semd still serves")


def test_sigquit_is_logged():
    d = start_semd(check_exit=False)
    os.kill(d.pid, signal.SIGQUIT)
    status = d.stop()
    eq(status, -signal.SIGQUIT, "SIGQUIT ends semd (as its default action)")
    ok("killed by SIGQUIT" in d.log_text(), "with a last log line saying so",
       d.log_text()[-300:])


def test_inherited_ignored_sigquit():
    """Started with SIGQUIT ignored (make check as a background job of a
    shell), semd still acts on SIGQUIT as documented, and SIGHUP reloads
    when nohup ignored it."""
    old_quit = signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    old_hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        d = start_semd(check_exit=False)
    finally:
        signal.signal(signal.SIGQUIT, old_quit)
        signal.signal(signal.SIGHUP, old_hup)
    os.kill(d.pid, signal.SIGHUP)
    ok(wait_until(lambda: "received SIGHUP" in d.log_text(), 10),
       "an inherited ignored SIGHUP: SIGHUP still reloads", d.log_text())
    os.kill(d.pid, signal.SIGQUIT)
    ok(wait_until(lambda: not d.alive(), 10), "an inherited ignored "
       "SIGQUIT: SIGQUIT still ends semd")
    status = d.stop()
    eq(status, -signal.SIGQUIT, "it dies of SIGQUIT (its default action)")
    ok("killed by SIGQUIT" in d.log_text(), "with a last log line saying so",
       d.log_text()[-300:])


def stop_with_waiters(sig):
    name = signal.Signals(sig).name
    pid = os.path.join(TMP, "semd-%s.pid" % name)
    d = start_semd("--pidfile", pid, "--semaphore", "s", "1")
    ok(os.path.exists(pid), "%s: the pidfile exists while semd runs" % name)
    holder = d.connect()
    expect_token(holder, "ACQUIRE s")
    # Not d.connect(): d.stop() would close them before they are read.
    waiters = [connect(d.port) for _ in range(3)]
    for w in waiters:
        w.send("ACQUIRE s\r\n")
    wait_until(lambda: "waiters=3" in holder.cmd("INFO s"))
    expect(holder, "INFO s", "OK name=s capacity=1 used=1 available=0 "
           "holders=1 waiters=3")
    d.stop(sig)     # checks exit status 0 and a clean log
    for i, w in enumerate(waiters):
        is_err(w.try_line(10), "UNAVAILABLE",
               "%s: waiter %d is told ERR UNAVAILABLE" % (name, i))
    ok("shutting down" in d.log_text(), "%s: the stop is logged" % name)
    ok(not os.path.exists(pid), "%s: the pidfile is gone" % name)


def test_sigterm():
    stop_with_waiters(signal.SIGTERM)


def test_sigint():
    stop_with_waiters(signal.SIGINT)


def test_waiter_reply_text():
    d = start_semd("--semaphore", "s", "1")
    h = d.connect()
    expect_token(h, "ACQUIRE s")
    w = connect(d.port)
    w.send("ACQUIRE s TIMEOUT 60000\r\n")
    wait_until(lambda: "waiters=1" in h.cmd("INFO s"))
    d.stop()
    eq(w.try_line(10), "ERR UNAVAILABLE shutting down",
       "the waiter's reply is exactly 'ERR UNAVAILABLE shutting down'")


def test_sigterm_flushes_grants_to_redis():
    with start_redis() as r:
        p = start_semd_redis(r, "--persistence", "async", "--semaphore",
                             "s", "5")
        c = p.connect()
        tokens = [token_of(c, "ACQUIRE s LEASE 60000") for _ in range(3)]
        c2 = p.connect()
        tokens.append(token_of(c2, "ACQUIRE s"))
        p.stop(signal.SIGTERM)
        got = sorted(redis_tokens(r, "s"))
        eq(got, sorted(tokens), "after SIGTERM every grant (leases and "
           "bound permits) is in Redis")


run(test_usr1_reopens_log, test_hup_reopens_log,
    test_other_signals_ignored_with_a_line, test_sigquit_is_logged,
    test_inherited_ignored_sigquit,
    test_sigterm, test_sigint, test_waiter_reply_text,
    test_sigterm_flushes_grants_to_redis, time_limit=180)
