#!/usr/bin/env python3
"""semd -t refuses what a start would refuse, short of taking the port
(a bind address that is not numeric, a logfile, pidfile or unixsocket in
a directory that cannot be written, bad Redis options, a bad syslog
facility); semd -T prints the effective configuration as a file semd
reads back; an unknown directive suggests the closest known one; a '#'
word after a value starts a comment."""
import os
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


def refused(args, want, desc):
    st, out, err = run_semd("-t", *args)
    eq(st, 1, "-t %s: exit 1" % desc)
    ok(want in err, "-t %s: says %r" % (desc, want), err.strip())


def test_refused():
    afile = conf("a-file", "")
    refused(["--bind", "localhost"], "bind localhost: not a numeric",
            "bind localhost")
    refused(["--bind", "127.0.0.1", "example.invalid"],
            "bind example.invalid: not a numeric", "a second bind name")
    refused(["--pidfile", "/nonexistent-dir/semd.pid"],
            "pidfile /nonexistent-dir: No such file or directory",
            "pidfile in a missing directory")
    refused(["--pidfile", afile + "/semd.pid"],
            "pidfile %s: Not a directory" % afile,
            "pidfile under a regular file")
    refused(["--logfile", "/nonexistent-dir/semd.log"],
            "logfile /nonexistent-dir: No such file or directory",
            "logfile in a missing directory")
    refused(["--unixsocket", "/nonexistent-dir/semd.sock"],
            "unixsocket /nonexistent-dir: No such file or directory",
            "unixsocket in a missing directory")
    refused(["--redis", "127.0.0.1"], "redis must be HOST:PORT",
            "redis without a port")
    refused(["--redis", "127.0.0.1:0"], "redis must be HOST:PORT",
            "redis port 0")
    refused(["--redis", "unix:"], "redis unix: needs a path",
            "redis unix: without a path")
    refused(["--persistence", "sync"], "needs a redis", "persistence "
            "without redis")
    refused(["--redis-timeout", "2h"], "redis-timeout: invalid value",
            "redis-timeout out of range")
    refused(["--syslog-facility", "kern"], "syslog-facility must be",
            "a bad syslog facility")
    refused(["--logfile", TMP], "logfile %s: Is a directory" % TMP,
            "logfile is a directory")
    refused(["--daemonize", "maybe"], "daemonize must be yes or no",
            "daemonize maybe")
    st, out, err = run_semd("-t", "--pidfile", os.path.join(TMP, "x.pid"),
                            "--logfile", os.path.join(TMP, "x.log"))
    eq((st, out.strip()), (0, "semd: configuration OK"),
       "-t accepts writable logfile and pidfile directories")
    ok(not os.path.exists(os.path.join(TMP, "x.pid")) and
       not os.path.exists(os.path.join(TMP, "x.log")),
       "-t creates neither file")


def test_suggestions():
    path = conf("typo.conf", "port 0\npidfle /tmp/semd.pid\n")
    st, out, err = run_semd("-t", "-c", path)
    eq(st, 1, "a misspelt directive is refused")
    ok("%s:2: unknown directive 'pidfle' (did you mean 'pidfile'?)" % path
       in err, "with the line and the closest directive", err.strip())
    st, out, err = run_semd("-t", "--keepalive", "10s")
    ok("did you mean 'tcp-keepalive'?" in err, "--keepalive suggests "
       "tcp-keepalive", err.strip())
    st, out, err = run_semd("-t", "--frobnicate", "1")
    ok("unknown directive 'frobnicate'" in err and "did you mean" not in
       err, "nothing close: no suggestion", err.strip())


def test_inline_comments():
    path = conf("inline.conf", "port 0   # any free port\n"
                "semaphore jobs 3 # three at once\n"
                "loglevel warn\t#quiet\n# full line\n")
    st, out, err = run_semd("-T", "-c", path)
    ok(st == 0, "-T accepts comments after values", err)
    ok("semaphore jobs 3\n" in out and "loglevel warn\n" in out and
       "port 0\n" in out, "the values before the comments are read", out)
    st, out, err = run_semd("-t", "--requirepass", "a#b")
    eq(st, 0, "a '#' inside a word is not a comment")


def test_dump():
    path = conf("dump.conf", "port 0\nsemaphore a 2\nsemaphore b 5\n"
                "tcp-keepalive 90s\nmax-output 1mb\nrequirepass hush\n"
                "logfile rel.log\nunixsocketperm 0770\n")
    st, out, err = run_semd("-T", "-c", path)
    ok(st == 0, "-T exits 0", err)
    for want in ("port 0\n", "semaphore a 2\n", "semaphore b 5\n",
                 "tcp-keepalive 90s\n", "max-output 1048576\n",
                 "maxclients 10000\n", "persistence none\n",
                 "unixsocketperm 0770\n", "daemonize no\n",
                 "syslog-facility daemon\n",
                 "# requirepass (set, not shown)\n"):
        ok(want in out, "-T prints %r" % want.strip())
    ok("hush" not in out, "-T does not print the password")
    ok("logfile %s/rel.log\n" % os.getcwd() in out,
       "a relative logfile is shown absolute", out)
    dumped = conf("dumped.conf", out)
    st2, out2, err2 = run_semd("-T", "-c", dumped)
    ok((st2, out2) == (0, out.replace("# requirepass (set, not shown)",
                                      "# requirepass (unset)")),
       "semd reads -T's output back to the same configuration", err2)


run(test_refused, test_suggestions, test_inline_comments, test_dump)
