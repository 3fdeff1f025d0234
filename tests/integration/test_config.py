#!/usr/bin/env python3
"""Command line and configuration file: --version, --help, -t, errors
naming file:line or the argument (exit 1), directives from the file,
command-line overrides, size suffixes, logfile, loglevel, pidfile."""
import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F403

TMP = tempfile.mkdtemp(prefix="semdtest.")


def conf(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def run_checked(args, timeout=10):
    """run_semd, but a daemon that starts instead of exiting is a
    failure (status None), not a hang."""
    try:
        return run_semd(*args, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", "<did not exit within %d s>" % timeout


def test_version_help():
    st, out, err = run_checked(["--version"])
    eq(st, 0, "semd --version exits 0")
    match(out.splitlines()[0] if out else "", r"semd [0-9]+\.[0-9]+\S*.*",
          "semd --version prints 'semd <version>' on stdout")
    st, out, err = run_checked(["--help"])
    eq(st, 0, "semd --help exits 0")
    ok(re.search(r"usage", out, re.I), "semd --help prints a usage on "
       "stdout", repr(out[:200]))
    ok("-c" in out and "-t" in out, "the usage mentions -c and -t")


GOOD = """\
# a comment
   # an indented comment

bind 127.0.0.1
port 0
protected-mode no
maxclients 100
max-line 1kb
max-output 8mb
max-semaphores 1000
tcp-keepalive 2m
loglevel debug
semaphore db-pool 10
semaphore gpu 2
"""


def test_check_mode():
    good = conf("good.conf", GOOD)
    st, out, err = run_checked(["-t", "-c", good])
    eq(st, 0, "semd -t -c good.conf exits 0")
    shipped = os.path.join(os.path.dirname(TESTS_DIR), "semd.conf")
    if os.path.exists(shipped):
        st, out, err = run_checked(["-t", "-c", shipped])
        eq(st, 0, "semd -t -c semd.conf (the shipped file) exits 0",)
    for v in ("500ms", "30s", "2m", "0", "1500"):
        st, _, err = run_checked(["-t", "--tcp-keepalive", v])
        eq(st, 0, "-t --tcp-keepalive %s (duration) is accepted" % v)
    # One rule for durations a person types: a bare number is seconds.
    st, out, err = run_checked(["-T", "--timeout", "300", "--tcp-keepalive",
                                "90", "--line-timeout", "1.5",
                                "--auth-timeout", "250ms"])
    got = dict(l.split(" ", 1) for l in out.splitlines() if " " in l)
    eq((st, got.get("timeout"), got.get("tcp-keepalive"),
        got.get("line-timeout"), got.get("auth-timeout")),
       (0, "5m", "90s", "1500ms", "250ms"),
       "-T --timeout 300 --tcp-keepalive 90 --line-timeout 1.5: a bare "
       "number is seconds, a suffix gives other units")
    st, _, err = run_checked(["-t", "--redis", "127.0.0.1:6379",
                              "--owner-lease", "100"])
    ok(st == 1 and "owner-lease" in err and "seconds" in err and
       "500ms..1m" in err,
       "--owner-lease 100 (100 s, above 1m) refused, naming the units",
       (st, err))
    for v in ("4096", "64", "1k", "1kb", "1mb"):
        st, _, err = run_checked(["-t", "--max-line", v])
        eq(st, 0, "-t --max-line %s (size) is accepted" % v)
    st, out, err = run_checked(["--port", "0", "-t", "-c", good], 5)
    eq(st, 0, "semd --port 0 -t -c good.conf exits 0 (-t and -c "
       "after a directive)")


BAD_LINES = [
    ("bogus-directive 1", "an unknown directive"),
    ("port 65536", "port out of range"),
    ("port abc", "port not a number"),
    ("port 1 2", "too many values"),
    ("bind", "a missing value"),
    ("maxclients 0", "maxclients 0"),
    ("max-line 10", "max-line below 64"),
    ("max-line 2mb", "max-line above 1mb"),
    ("max-output 100", "max-output below 4096"),
    ("max-output 12parsecs", "an unknown size suffix"),
    ("tcp-keepalive 3h", "tcp-keepalive above 2h"),
    ("tcp-keepalive 5x", "an unknown duration suffix"),
    ("loglevel loud", "an unknown loglevel"),
    ("protected-mode maybe", "protected-mode not yes/no"),
    ("semaphore lonely", "semaphore without capacity"),
    ("semaphore bad!name 3", "semaphore with a bad name"),
    ("semaphore s 0", "semaphore capacity 0"),
    ("semaphore s 2147483648", "semaphore capacity over 2^31-1"),
    ("unixsocketperm 0999", "unixsocketperm not octal"),
]


def test_bad_config_files():
    for i, (line, what) in enumerate(BAD_LINES):
        path = conf("bad%d.conf" % i, "# semd test\nport 0\n%s\n" % line)
        for args in (["-t", "-c", path], ["-c", path]):
            st, out, err = run_checked(args)
            msg = out + err
            ok(st == 1 and (path + ":3") in msg,
               "%s (%r): semd %s exits 1 naming %s:3" %
               (what, line, " ".join(args[:-1]), os.path.basename(path)),
               "status %r, output %r" % (st, msg[-300:]))
    path = conf("bad-after.conf", "port 0\nbogus 1\n")
    st, out, err = run_checked(["--port", "0", "-t", "-c", path], 5)
    ok(st == 1 and (path + ":2") in out + err,
       "semd --port 0 -t -c bad.conf: the file is read even after "
       "a --directive (exit 1, file:2)",
       "status %r, output %r" % (st, (out + err)[-300:]))
    missing = os.path.join(TMP, "no-such.conf")
    st, out, err = run_checked(["-t", "-c", missing])
    ok(st == 1 and missing in out + err,
       "a missing -c file: exit 1 naming it", "status %r, %r" %
       (st, (out + err)[-200:]))


def test_bad_arguments():
    cases = [(["--bogus", "1"], "--bogus"),
             (["--port", "abc"], "--port"),
             (["--port", "70000"], "--port"),
             (["--max-line", "1"], "--max-line"),
             (["--loglevel", "loud"], "--loglevel"),
             (["--semaphore", "x"], "--semaphore"),
             (["--maxclients"], "--maxclients"),
             (["stray"], "stray"),
             (["-c"], "-c"),
             (["--persistence", "maybe"], "--persistence"),
             (["--persistence", "sync"], "redis"),
             (["--persistence", "async"], "redis"),
             (["--redis", "localhost"], "redis"),
             (["--redis", "localhost:0"], "redis"),
             (["--redis", "localhost:99999"], "redis"),
             (["--redis", "unix:"], "redis"),
             (["--redis", "127.0.0.1:6379", "--redis-timeout", "5ms"],
              "--redis-timeout"),
             (["--redis", "127.0.0.1:6379", "--reclaim-grace", "2d"],
              "--reclaim-grace"),
             (["--redis-db", "-1"], "--redis-db"),
             (["--persistence-backlog", "0"], "--persistence-backlog")]
    for args, name in cases:
        st, out, err = run_checked(args)
        ok(st == 1 and name in out + err,
           "semd %s: exit 1 naming %s" % (" ".join(args), name),
           "status %r, output %r" % (st, (out + err)[-300:]))
        st, out, err = run_checked(["-t"] + args)
        eq(st, 1, "semd -t %s: exit 1" % " ".join(args))


def test_persistence_directives():
    """Good persistence settings pass -t; none needs no Redis running."""
    for args in (["--redis", "127.0.0.1:6379"],
                 ["--redis", "unix:/run/redis/redis.sock",
                  "--persistence", "async", "--redis-db", "3",
                  "--redis-prefix", "app1:", "--redis-timeout", "250ms",
                  "--reclaim-grace", "30s", "--persistence-backlog", "500"],
                 ["--redis", "[::1]:6380", "--persistence", "none"]):
        st, out, err = run_checked(["-t"] + args)
        eq(st, 0, "semd -t %s: exit 0" % " ".join(args))
    with start_semd() as d:
        stats = d.connect().stats()
        eq((stats.get("persistence"), stats.get("persistence_mode"),
            stats.get("redis_durability"), stats.get("redis_master")),
           ("off", "none", "-", "-"),
           "without redis, STATS shows persistence off and no master")


def test_file_directives_and_overrides():
    path = conf("run.conf", "max-line 100\nsemaphore cfgsem 3\n"
                "semaphore other 7\n")
    with start_semd("-c", path) as d:
        c = d.connect()
        eq([(r.get("name"), r.get("capacity")) for r in c.listing("LIST")],
           [("cfgsem", "3"), ("other", "7")],
           "semaphores from the file exist")
        c.send("PING" + " " * 96 + "\r\n")
        eq(c.line(), "OK PONG", "max-line 100 from the file: 100 bytes ok")
        c.send("PING" + " " * 97 + "\r\n")
        is_err(c.try_line(5), "TOOLONG", "max-line 100 from the file: "
               "101 bytes -> ERR TOOLONG")
    with start_semd("-c", path, "--max-line", "200") as d:
        c = d.connect()
        c.send("PING" + " " * 196 + "\r\n")
        eq(c.try_line(5), "OK PONG", "--max-line 200 overrides the file's "
           "100")
        c.send("PING" + " " * 197 + "\r\n")
        is_err(c.try_line(5), "TOOLONG", "...and 201 bytes is TOOLONG")


def test_command_line_values():
    with start_semd("--semaphore", "a", "1", "--semaphore", "b", "2",
                    "--max-line", "1kb") as d:
        c = d.connect()
        eq([(r.get("name"), r.get("capacity")) for r in c.listing("LIST")],
           [("a", "1"), ("b", "2")], "--semaphore is repeatable")
        c.send("PING" + " " * 1020 + "\r\n")
        eq(c.try_line(5), "OK PONG", "--max-line 1kb: 1024 bytes ok")
        c.send("PING" + " " * 1021 + "\r\n")
        is_err(c.try_line(5), "TOOLONG", "--max-line 1kb: 1025 bytes -> "
               "TOOLONG")
    with start_semd("--max-line", "1k") as d:
        c = d.connect()
        c.send("PING" + " " * 996 + "\r\n")
        eq(c.try_line(5), "OK PONG", "--max-line 1k (1000): 1000 bytes ok")
        c.send("PING" + " " * 997 + "\r\n")
        is_err(c.try_line(5), "TOOLONG", "--max-line 1k: 1001 bytes -> "
               "TOOLONG")


def test_logfile_pidfile():
    logf = os.path.join(TMP, "semd.log")
    pidf = os.path.join(TMP, "semd.pid")
    d = start_semd("--logfile", logf, "--pidfile", pidf, logfile=logf)
    with open(d.stderr_path) as f:
        early = f.read()
    ok("listening on" not in early, "with --logfile, nothing is logged "
       "to stderr", repr(early[:200]))
    with open(logf) as f:
        ok("ready" in f.read(), "the log goes to --logfile")
    try:
        with open(pidf) as f:
            pid = f.read().strip()
    except OSError as e:
        pid = str(e)
    eq(pid, str(d.pid), "--pidfile holds the daemon's PID")
    c = d.connect()
    expect(c, "PING", "OK PONG")
    d.stop()
    ok(not os.path.exists(pidf), "the pidfile is removed at exit")


def test_loglevel_warn():
    sock = os.path.join(TMP, "lw.sock")
    d = start_semd("--port", "0", "--unixsocket", sock, "--loglevel",
                   "warn", bind=None, wait_ready=False)
    ready = wait_until(lambda: os.path.exists(sock), 10)
    ok(ready, "semd --loglevel warn starts (its Unix socket appears)")
    if ready:
        c = None
        for _ in range(100):
            try:
                c = connect_unix(sock)
                break
            except OSError:
                wait_until(lambda: False, 0.05)
        if c:
            expect(c, "PING", "OK PONG")
            c.close()
    d.stop()
    text = d.log_text()
    ok(" info: " not in text and " debug: " not in text,
       "--loglevel warn: no info or debug lines", repr(text[:300]))


if __name__ == "__main__":
    run(test_version_help, test_check_mode, test_bad_config_files,
        test_bad_arguments, test_persistence_directives,
        test_file_directives_and_overrides, test_command_line_values, test_logfile_pidfile, test_loglevel_warn)
