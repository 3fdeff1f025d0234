#!/usr/bin/env python3
"""semd-cli top. Under a pseudo-terminal of 80x24: the busiest semaphore
(the one with waiters) is the first row, no line is wider than the
terminal, s changes the sort, / filters by name, a resize redraws to the
new size, a semd that goes away is shown and found again, q and Ctrl-C
quit with the terminal restored. Piped: plain text frames, the rates
known (grants/s, timeouts/s), no escape bytes. Its usage errors, and
exit 4 when semd cannot be reached at all."""
import os
import re
import signal
import subprocess
import sys
import termios
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403
import ptyterm  # noqa: E402
from ptyterm import set_size  # noqa: E402

ESC_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
LONG = "a-very-long-semaphore-name-that-cannot-fit-in-eighty-columns-x"


class Screen(ptyterm.Term):
    """semd-cli top on a pty of rows x cols that is its controlling
    terminal (so a resize sends it SIGWINCH)."""

    def __init__(self, argv, rows=24, cols=80):
        super().__init__(argv, client_env(), ctty=True, rows=rows,
                         cols=cols)

    def _read(self, timeout):
        self.read(timeout)

    def frame(self):
        """The last whole frame: (lines above the keys, keys line)."""
        end = self.text.rfind("\x1b[J")
        start = self.text.rfind("\x1b[H", 0, end)
        if start < 0 or end < 0:
            return None
        rest = self.text[end:]
        m = re.match(r"\x1b\[J\x1b\[[0-9]+;1H([^\x1b]*)", rest)
        if not m:
            return None
        body = self.text[start + 3:end]
        return [ESC_RE.sub("", ln) for ln in body.split("\r\n")], m.group(1)

    def wait_frame(self, pred, timeout=15):
        """Read until the last frame satisfies pred(lines, keys)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            f = self.frame()
            if f and pred(*f):
                return f
            self._read(0.1)
        return None


def rows_of(lines):
    """The semaphore rows of a frame: the lines under the NAME titles."""
    for i, ln in enumerate(lines):
        if ln.startswith("NAME "):
            return [r for r in lines[i + 1:] if r.strip()]
    return []


def row_names(lines):
    return [r.split()[0] for r in rows_of(lines)]


def busy_semd(extra=0):
    """semd with busy (1, held, 2 waiters), jobs, idle-a, idle-b, a long
    name and extra more; returns (semd, connections to close)."""
    args = ["--semaphore", "busy", "1", "--semaphore", "jobs", "3",
            "--semaphore", "idle-a", "5", "--semaphore", "idle-b", "5",
            "--semaphore", LONG, "2"]
    for i in range(extra):
        args += ["--semaphore", "s%02d" % i, "4"]
    d = start_semd(*args)
    holder = d.connect()
    expect_token(holder, "ACQUIRE busy")
    waiters = [d.connect(), d.connect()]
    for w in waiters:
        w.send("ACQUIRE busy\r\n")
    ok(wait_until(lambda: holder.info("busy")["waiters"] == "2"),
       "busy has 2 waiters")
    return d, [holder] + waiters


class Load:
    """A thread that TRYs jobs (granted, then released) and busy (always
    TIMEOUT) until stopped: grants/s and timeouts/s above 0."""

    def __init__(self, d):
        self.c = d.connect()
        self.stop = threading.Event()
        self.rounds = 0
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop.is_set():
            m = re.fullmatch(r"OK ([0-9]+)", self.c.cmd("TRY jobs"))
            if m:
                self.c.cmd("RELEASE jobs %s" % m.group(1))
            self.c.cmd("TRY busy")
            self.rounds += 1
            time.sleep(0.01)

    def close(self):
        self.stop.set()
        self.t.join(10)
        self.c.close()


def test_piped():
    d, conns = busy_semd()
    load = Load(d)
    rc, out, err = cli(d.port, "top", "-i", "500ms")
    eq(rc, 0, "top | cat: exit 0")
    ok("\x1b" not in out, "no escape bytes when piped", repr(out[:300]))
    lines = out.splitlines()
    ok(len(lines) >= 3 and lines[0].startswith("semd top - 127.0.0.1:%d"
                                               % d.port),
       "the header names the server", out)
    ok(re.search(r"role single +persistence off +connections [0-9]+ +"
                 r"commands/s [0-9.]+k? +semaphores 5", out),
       "the header: role, persistence, connections, commands/s", out)
    eq(row_names(lines)[:1], ["busy"], "the busiest semaphore first")
    eq(sorted(row_names(lines)), sorted(["busy", "jobs", "idle-a", "idle-b",
                                         LONG]),
       "one row per semaphore, whole names when piped")
    rows = {r.split()[0]: r.split() for r in rows_of(lines)}
    busy = rows.get("busy", [])
    eq(busy[1:6], ["1", "1", "########", "1", "2"],
       "busy: capacity 1, used 1, a full bar, 1 holder, 2 waiters")
    jobs = rows.get("jobs", [])
    ok(len(jobs) == 10 and re.fullmatch(r"[0-9.]+k?", jobs[6]) and
       float(jobs[6].rstrip("k")) > 0,
       "jobs: grants/s above 0 (two samples, the rate is known)", jobs)
    ok(len(busy) == 10 and re.fullmatch(r"[0-9.]+k?", busy[9]) and
       float(busy[9].rstrip("k")) > 0, "busy: timeouts/s above 0", busy)
    ok(len(busy) == 10 and re.fullmatch(r"[0-9.]+(ms|s|m|h)", busy[7]) and
       re.fullmatch(r"[0-9.]+(ms|s|m|h)", busy[8]),
       "busy: wait p50 and p99 as durations", busy)
    rc, out, err = cli(d.port, "top", "-n", "2", "--interval", "0.2")
    eq(rc, 0, "top -n 2: exit 0")
    eq(len(re.findall(r"^semd top - ", out, re.M)), 2, "-n 2: two frames")
    load.close()
    for c in conns:
        c.close()


def test_usage():
    with start_semd("--semaphore", "jobs", "1") as d:
        for args, what in ((["-i", "10ms"], "an interval under 100ms"),
                           (["-i", "x"], "a bad interval"),
                           (["-n", "0"], "-n 0"),
                           (["jobs"], "an argument"),
                           (["--json"], "--json")):
            rc, out, err = cli(d.port, "top", *args)
            eq(rc, 2, "top %s: exit 2 (%s)" % (" ".join(args), what))
            ok("top" in err, "and says why", err)
        rc, out, err = cli(d.port, input="top\n")
        eq(rc, 2, "top from a pipe of commands: exit 2")
        ok("semd-cli top" in err, "and says how to run it", err)
        rc, out, err = cli(d.port, "top", "--help")
        ok(rc == 0 and "--interval" in out and "q quits" in out,
           "top --help", out + err)
    rc, out, err = cli(free_port(), "top")
    eq(rc, 4, "top with no semd to reach: exit 4")
    ok("semd-cli:" in err, "and says why", err)


def check_fits(lines, keys, rows, cols, what):
    wide = [ln for ln in lines + [keys] if len(ln) > cols]
    ok(not wide, "%s: no line wider than %d columns" % (what, cols),
       repr(wide[:3]))
    ok(len(lines) <= rows - 1, "%s: the rows leave the last line to the "
       "keys (%d lines)" % (what, len(lines)))


def test_terminal():
    d, conns = busy_semd(extra=30)
    s = Screen(cli_argv(d.port, "top", "-i", "300ms"))
    try:
        f = s.wait_frame(lambda lines, keys: "busy" in row_names(lines))
        ok(f is not None, "a frame with busy's row", s.text[-2000:])
        if f is None:
            return
        lines, keys = f
        eq(row_names(lines)[:1], ["busy"], "busy (2 waiters) is the first "
           "row")
        check_fits(lines, keys, 24, 80, "80x24")
        eq(len(rows_of(lines)), 19, "80x24: 19 rows under 4 header lines")
        ok("q quit" in keys and "sort" in keys, "the keys line", keys)
        ok("sort: waiters" in lines[0], "sorted by waiters", lines[0])
        ok(any(ln.startswith("a-very-long") for ln in rows_of(lines)) or
           len(rows_of(lines)) == 19, "long names are cut to fit")

        s.key("s")
        f = s.wait_frame(lambda lines, keys: "sort: used%" in lines[0])
        ok(f is not None, "s: the sort becomes used%", s.text[-500:])
        if f:
            eq(row_names(f[0])[:1], ["busy"], "busy (full) first by used%")
        s.key("ss")
        f = s.wait_frame(lambda lines, keys: "sort: wait p99" in lines[0])
        ok(f is not None, "s twice more: wait p99", s.text[-500:])
        s.key("s")
        f = s.wait_frame(lambda lines, keys: "sort: name" in lines[0])
        ok(f is not None and row_names(f[0])[:2] == [LONG[:17], "busy"],
           "then name: in byte order", f and row_names(f[0])[:3])

        s.key("/idle")
        f = s.wait_frame(lambda lines, keys: keys.endswith("idle"))
        ok(f is not None and "filter" in f[1],
           "/: the bottom line reads the filter", s.text[-500:])
        s.key("\r")
        f = s.wait_frame(lambda lines, keys: "filter: idle" in lines[2])
        ok(f is not None, "Enter applies it", s.text[-500:])
        if f:
            eq(row_names(f[0]), ["idle-a", "idle-b"], "only the rows "
               "whose name has 'idle'")
            ok("(2 of 35)" in f[0][2], "the header says how many",
               f[0][2])
        s.key("/x\x1b")
        f = s.wait_frame(lambda lines, keys: "q quit" in keys)
        ok(f is not None and row_names(f[0]) == ["idle-a", "idle-b"],
           "Esc cancels a new filter", f and row_names(f[0]))
        s.key("/\x15\r")
        f = s.wait_frame(lambda lines, keys: len(rows_of(lines)) == 19)
        ok(f is not None, "an empty filter shows every row again",
           s.text[-500:])

        set_size(s.master, 30, 100)
        f = s.wait_frame(lambda lines, keys: any(
            len(ln) == 99 for ln in lines))
        ok(f is not None, "a resize to 100x30 redraws at the new width",
           s.text[-500:])
        if f:
            check_fits(f[0], f[1], 30, 100, "100x30")
            eq(len(rows_of(f[0])), 25, "100x30: 25 rows")

        s.key("q")
        eq(s.wait_exit(), 0, "q quits with exit 0")
        ok("\x1b[?1049l" in s.text and "\x1b[?25h" in s.text,
           "the main screen and the cursor are restored", s.text[-200:])
        attrs = termios.tcgetattr(s.master)
        ok(attrs[3] & termios.ICANON and attrs[3] & termios.ECHO,
           "the terminal is back in canonical mode with echo")
    finally:
        s.close()
        for c in conns:
            c.close()


def test_ctrl_c_and_lost_server():
    port = free_port()
    args = ["--bind", "127.0.0.1", "--port", str(port), "--semaphore",
            "jobs", "2"]
    d = Semd(args, bind=None)
    s = Screen(cli_argv(port, "top", "-i", "200ms"))
    try:
        f = s.wait_frame(lambda lines, keys: "jobs" in row_names(lines))
        ok(f is not None, "a frame with jobs", s.text[-1000:])
        d.stop()
        f = s.wait_frame(lambda lines, keys: "stale, retrying" in lines[2])
        ok(f is not None, "semd gone: the header says so and it retries",
           s.text[-1000:])
        ok(s.p.poll() is None, "top keeps running")
        if f:
            eq(row_names(f[0]), ["jobs"], "the last rows stay shown")
        d = Semd(args + ["--semaphore", "more", "1"], bind=None)
        f = s.wait_frame(lambda lines, keys: "more" in row_names(lines) and
                         "stale" not in lines[2])
        ok(f is not None, "semd back: top finds it again", s.text[-1000:])
        s.key("\x03")
        eq(s.wait_exit(), 0, "Ctrl-C quits with exit 0")
        ok("\x1b[?1049l" in s.text, "the main screen is restored")
    finally:
        s.close()
        d.stop()


def test_iterations_on_terminal():
    with start_semd("--semaphore", "jobs", "2") as d:
        s = Screen(cli_argv(d.port, "top", "-n", "3", "-i", "200ms"))
        try:
            eq(s.wait_exit(15), 0, "-n 3 on a terminal: leaves by itself, "
               "exit 0")
            eq(s.text.count("\x1b[J"), 3, "after three frames")
            ok("\x1b[?1049l" in s.text, "the main screen restored")
        finally:
            s.close()


def test_sigterm():
    with start_semd("--semaphore", "jobs", "2") as d:
        s = Screen(cli_argv(d.port, "top"))
        try:
            ok(s.wait_frame(lambda lines, keys: "jobs" in row_names(lines))
               is not None, "a frame", s.text[-1000:])
            s.p.send_signal(signal.SIGTERM)
            eq(s.wait_exit(), -signal.SIGTERM, "SIGTERM ends it as SIGTERM")
            ok("\x1b[?1049l" in s.text, "after restoring the screen")
            attrs = termios.tcgetattr(s.master)
            ok(attrs[3] & termios.ECHO, "and echo")
        finally:
            s.close()


run(test_piped, test_usage, test_terminal, test_ctrl_c_and_lost_server,
    test_iterations_on_terminal, test_sigterm, time_limit=180)
