"""semdtest: the shared harness of semd's integration tests.

Each test script is run as `python3 tests/integration/test_x.py` with
SEMD_BIN (the daemon to test) and SEMD_TESTS (this directory) in the
environment. It imports this module, writes its tests as functions and
ends with `semdtest.run(test_a, test_b, ...)`:

    with start_semd("--semaphore", "jobs", "2") as d:
        c = connect(d.port)
        eq(c.cmd("PING"), "OK PONG", "PING answers OK PONG")

Every check prints one line, "ok - ..." or "FAIL - ...: details", which
tests/totals.sh counts. The script exits 0 when every check passed, 1
otherwise, 77 when skip() was called for a facility that is missing.

Daemons are always stopped by PID (context manager, run(), atexit and a
watchdog alarm); after a daemon stops, its exit status (0 after SIGTERM or
SIGINT) and its log (no AddressSanitizer / LeakSanitizer / UBSan report)
are checked too.

SEMD_ADDR=host:port runs a test against a semd started by hand (under a
debugger, say) instead of starting one: start_semd() then returns an
ExternalSemd that only connects (tests that restart or signal the daemon,
or start several, need their own).
"""

import atexit
import errno
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

sys.dont_write_bytecode = True

TESTS_DIR = os.environ.get("SEMD_TESTS") or os.path.dirname(
    os.path.abspath(__file__))
SEMD_BIN = os.environ.get("SEMD_BIN") or os.path.join(
    os.path.dirname(TESTS_DIR), "daemon", "semd")

SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:")

# --------------------------------------------------------------------------
# Checks and reporting
# --------------------------------------------------------------------------

_passed = 0
_failed = 0
_current = ""            # name of the running test function



def sanitized(path):
    """True when the binary at path was built with AddressSanitizer (the
    benchmarks say their figures are then not representative)."""
    try:
        with open(path, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False

def _emit(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def note(text):
    """A comment line in the test log (not counted)."""
    for ln in str(text).splitlines() or [""]:
        _emit("# " + ln)


def _label(desc):
    return "[%s] %s" % (_current, desc) if _current else desc


def ok(cond, desc, detail=None):
    """Record one check; returns cond so tests can branch on it."""
    global _passed, _failed
    if cond:
        _passed += 1
        _emit("ok - " + _label(desc))
    else:
        _failed += 1
        msg = "FAIL - " + _label(desc)
        if detail:
            msg += ": " + str(detail)
        _emit(msg)
    return bool(cond)


def eq(got, want, desc):
    return ok(got == want, desc, "got %r, expected %r" % (got, want))


def match(got, regex, desc):
    """got (a str) must fully match regex."""
    good = isinstance(got, str) and re.fullmatch(regex, got) is not None
    return ok(good, desc, "got %r, expected a match of /%s/" % (got, regex))


def is_err(got, code, desc):
    """got must be `ERR CODE human text` (some text after the code)."""
    good = isinstance(got, str) and re.fullmatch(
        r"ERR %s [^\r\n]*\S[^\r\n]*" % re.escape(code), got) is not None
    return ok(good, desc, "got %r, expected 'ERR %s <text>'" % (got, code))


def is_token(got, desc):
    """got must be `OK <token>`; returns the token (int) or None."""
    m = re.fullmatch(r"OK ([0-9]+)", got) if isinstance(got, str) else None
    ok(m is not None, desc, "got %r, expected 'OK <token>'" % (got,))
    return int(m.group(1)) if m else None


def show(req, limit=70):
    """A request as printable text for a check's description."""
    if isinstance(req, bytes):
        req = req.decode("latin-1")
    out = "".join(ch if " " <= ch <= "~" else "\\x%02x" % ord(ch)
                  for ch in req)
    if len(out) > limit:
        out = out[:limit - 20] + "...(%d bytes)" % len(req)
    return "'%s'" % out


# The words INFO <sem> ends with since metrics (README "Monitoring").
INFO_METRICS_RE = (r" wait_p50_ms=[0-9]+ wait_p99_ms=[0-9]+ grants_total=[0-9]+"
                   r" timeouts_total=[0-9]+")


def info_v1(line):
    """An INFO reply without its metrics words (they must be well formed),
    so that tests can compare the LIST-shaped part exactly; anything else
    is returned as it is."""
    if isinstance(line, str) and line.startswith("OK name="):
        m = re.search(INFO_METRICS_RE + "$", line)
        if m:
            return line[:m.start()]
    return line


def expect(c, req, want, desc=None):
    """Send req; the reply must be exactly want (an INFO reply is compared
    without its metrics words when want has none). Returns the reply."""
    got = c.cmd(req)
    cmp = got
    if (isinstance(want, str) and want.startswith("OK name=") and
            "wait_p50_ms=" not in want):
        cmp = info_v1(got)
    eq(cmp, want, desc or "%s -> %s" % (show(req), want))
    return got


def expect_err(c, req, code, desc=None):
    """Send req; the reply must be `ERR CODE <text>`. Returns the reply."""
    got = c.cmd(req)
    is_err(got, code, desc or "%s -> ERR %s" % (show(req), code))
    return got


def expect_token(c, req, desc=None):
    """Send req; the reply must be `OK <token>`. Returns the token or 0."""
    got = c.cmd(req)
    return is_token(got, desc or "%s -> OK <token>" % show(req)) or 0


def free_port():
    """A free TCP port on 127.0.0.1 (bind to port 0, read it, close). It
    may be taken again before it is used: servers started on it retry
    with another one (redistest.Redis)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


class Skip(Exception):
    pass


def skip(reason):
    """Skip the whole script (exit 77): only for a missing facility."""
    raise Skip(reason)


def wait_until(pred, timeout=10.0, interval=0.02):
    """Poll pred() until it is true or timeout passes; returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


# --------------------------------------------------------------------------
# The daemon
# --------------------------------------------------------------------------

_live = []               # running Semd objects, stopped at exit whatever happens


class StartError(Exception):
    pass


class Semd:
    """A running semd: .port, .pid, .listeners, .log_text(), .stop()."""

    def __init__(self, args, env=None, bind="127.0.0.1", timeout=10.0,
                 logfile=None, check_exit=True, wait_ready=True):
        self.args = list(args)
        self.tmpdir = tempfile.mkdtemp(prefix="semdtest.")
        self.stderr_path = os.path.join(self.tmpdir, "stderr.log")
        self.logfile = logfile          # also read it if --logfile is used
        self.check_exit = check_exit
        self.status = None
        self.conns = []
        argv = [SEMD_BIN]
        if bind is not None:
            argv += ["--bind"] + (bind.split() if isinstance(bind, str)
                                  else list(bind))
            argv += ["--port", "0"]
        argv += self.args
        self.argv = argv
        full_env = dict(os.environ)
        full_env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        if env:
            full_env.update(env)
        self._errf = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=self._errf, stderr=self._errf,
                                     env=full_env, close_fds=True)
        self.pid = self.proc.pid
        _live.append(self)
        self.listeners = []
        self.unix_paths = []
        self.port = None
        if not wait_ready:
            return
        try:
            self._wait_ready(bind, timeout)
        except BaseException:
            self.stop(quiet=True)
            raise

    def _wait_ready(self, bind, timeout):
        deadline = time.monotonic() + timeout
        want = None
        if bind is not None:
            want = (bind.split() if isinstance(bind, str) else list(bind))[0]
        while True:
            text = self.log_text()
            self.listeners = [(m.group(1), int(m.group(2))) for m in
                              re.finditer(r"listening on (\S+):(\d+)\s*$",
                                          text, re.M)
                              if not m.group(1).startswith("unix")]
            self.unix_paths = re.findall(r"listening on unix:(\S+)\s*$",
                                         text, re.M)
            pos = text.find("listening on ")
            if pos >= 0 and "ready" in text[pos:]:
                for addr, port in self.listeners:
                    if want is None or addr.strip("[]") == want:
                        self.port = port
                        break
                if self.port is None and self.listeners:
                    self.port = self.listeners[0][1]
                return
            if self.proc.poll() is not None:
                raise StartError("semd exited with status %s at start-up; "
                                 "argv %r; log:\n%s" %
                                 (self.proc.returncode, self.argv, text))
            if time.monotonic() >= deadline:
                raise StartError("semd did not log 'listening on ...' and "
                                 "'ready' within %.0f s; argv %r; log:\n%s"
                                 % (timeout, self.argv, text))
            time.sleep(0.02)

    def log_text(self):
        parts = []
        for p in (self.stderr_path, self.logfile):
            if p:
                try:
                    with open(p, "rb") as f:
                        parts.append(f.read().decode("utf-8", "replace"))
                except OSError:
                    pass
        return "".join(parts)

    def log_lines(self, level=None):
        lines = self.log_text().splitlines()
        if level:
            lines = [ln for ln in lines if (" %s: " % level) in ln]
        return lines

    def alive(self):
        return self.proc.poll() is None

    def rss_kb(self):
        """VmRSS of the daemon in kB (None if unreadable)."""
        try:
            with open("/proc/%d/status" % self.pid) as f:
                for ln in f:
                    if ln.startswith("VmRSS:"):
                        return int(ln.split()[1])
        except OSError:
            return None
        return None

    def connect(self, **kw):
        c = connect(self.port, **kw)
        self.conns.append(c)
        return c

    def stop(self, sig=signal.SIGTERM, quiet=False):
        """Stop by PID: sig, wait up to 10 s, then SIGKILL. Returns the exit
        status (negative: killed by that signal). Unless quiet, checks the
        status is 0 and the log has no sanitizer report."""
        if self.status is not None:
            return self.status
        killed = False
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                killed = True
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait()
        self.status = self.proc.returncode
        for c in self.conns:
            c.close()
        if self in _live:
            _live.remove(self)
        try:
            self._errf.close()
        except OSError:
            pass
        if quiet:
            return self.status
        text = self.log_text()
        name = signal.Signals(sig).name
        detail = "exit status %s%s; log tail:\n%s" % (
            self.status, " (did not exit within 10 s: SIGKILLed)"
            if killed else "", _tail(text))
        if self.check_exit:
            ok(self.status == 0, "semd pid %d exits 0 on %s" %
               (self.pid, name), detail)
        found = [m for m in SANITIZER_MARKERS if m in text]
        ok(not found, "no sanitizer report in the log of semd pid %d" %
           self.pid, "found %s; log tail:\n%s" % (found, _tail(text, 60)))
        return self.status

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def _tail(text, n=30):
    lines = text.splitlines()[-n:]
    return "\n".join("#   " + ln for ln in lines)


class ExternalSemd:
    """A semd started by hand (under gdb, valgrind, rr), named by
    SEMD_ADDR=host:port, as memcached's T_MEMD_USE_DAEMON: the test talks
    to it and never starts, stops or signals it. Start it with the
    arguments the test would use (a note says which)."""

    def __init__(self, addr, args):
        host, _, port = addr.rpartition(":")
        self.host = host or "127.0.0.1"
        self.port = int(port)
        self.pid = None
        self.status = None
        self.conns = []
        self.listeners = [("%s:%d" % (self.host, self.port))]
        note("SEMD_ADDR=%s: using the semd there; the test would have "
             "started: semd %s" % (addr, " ".join(args)))

    def alive(self):
        return True

    def log_text(self):
        return ""

    def rss_kb(self):
        return None

    def connect(self, **kw):
        c = connect(self.port, host=self.host, **kw)
        self.conns.append(c)
        return c

    def stop(self, sig=signal.SIGTERM, quiet=False):
        for c in self.conns:
            c.close()
        self.conns = []
        return 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def start_semd(*args, env=None, **kw):
    """Start `$SEMD_BIN --bind 127.0.0.1 --port 0 ARGS...` and wait until it
    has logged `listening on 127.0.0.1:PORT` and `ready`; with SEMD_ADDR
    set, use the semd there instead (ExternalSemd)."""
    if os.environ.get("SEMD_ADDR"):
        return ExternalSemd(os.environ["SEMD_ADDR"], args)
    return Semd(args, env=env, **kw)


def run_semd(*args, timeout=20, env=None):
    """Run semd to completion (for --version, -t, bad configs): returns
    (status, stdout, stderr) as text."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    p = subprocess.run([SEMD_BIN] + list(args), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, env=full_env)
    return (p.returncode, p.stdout.decode("utf-8", "replace"),
            p.stderr.decode("utf-8", "replace"))


def _stop_all():
    for d in list(_live):
        try:
            d.stop(quiet=True)
        except Exception:
            try:
                os.kill(d.pid, signal.SIGKILL)
            except OSError:
                pass


atexit.register(_stop_all)


# --------------------------------------------------------------------------
# Clients
# --------------------------------------------------------------------------

class ReplyTimeout(Exception):
    pass


class ConnClosed(Exception):
    pass


class Conn:
    """One client connection, reading reply lines."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.eof = False
        self.bare_lf = 0          # reply lines that ended "\n" without "\r"
        self.closed = False

    # -- writing --
    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sock.settimeout(30)
        self.sock.sendall(data)

    # -- reading --
    def _fill(self, timeout):
        """Read more bytes, waiting at most timeout. False on timeout."""
        if self.eof:
            return False
        r, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not r:
            return False
        try:
            data = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def raw_line(self, timeout=5.0):
        """One reply line as bytes, with its line end."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            if self.eof:
                raise ConnClosed("connection closed before a full line "
                                 "(pending %r)" % self.buf[:200])
            left = deadline - time.monotonic()
            if left <= 0:
                raise ReplyTimeout("no reply line within %.1f s "
                                   "(pending %r)" % (timeout, self.buf[:200]))
            self._fill(left)
        i = self.buf.index(b"\n")
        ln, self.buf = self.buf[:i + 1], self.buf[i + 1:]
        return ln

    def line(self, timeout=5.0):
        """One reply line without its CRLF (str). Raises ReplyTimeout or
        ConnClosed."""
        ln = self.raw_line(timeout)
        if ln.endswith(b"\r\n"):
            ln = ln[:-2]
        else:
            self.bare_lf += 1
            ln = ln[:-1]
        return ln.decode("latin-1")

    def lines(self, k, timeout=5.0):
        return [self.line(timeout) for _ in range(k)]

    def cmd(self, text, timeout=5.0):
        """Send text + CRLF, return the reply line."""
        self.send(text + "\r\n")
        return self.line(timeout)

    def try_line(self, timeout):
        """A reply line, or None if none comes within timeout (or EOF)."""
        try:
            return self.line(timeout)
        except (ReplyTimeout, ConnClosed):
            return None

    def no_reply(self, timeout=0.3):
        """True if nothing at all arrives within timeout."""
        if self.buf:
            return False
        self._fill(timeout)
        return not self.buf and not self.eof

    def expect_closed(self, timeout=5.0):
        """Wait for the server to close: True on EOF/reset within timeout.
        Bytes that arrived meanwhile (beyond what was buffered) are kept in
        .extra."""
        deadline = time.monotonic() + timeout
        start = len(self.buf)
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._fill(left)
        self.extra = self.buf[start:]
        return self.eof

    def drain(self, timeout=10.0):
        """Read until EOF (or timeout); returns (bytes_read, eof)."""
        deadline = time.monotonic() + timeout
        total = len(self.buf)
        self.buf = b""
        while not self.eof and time.monotonic() < deadline:
            r, _, _ = select.select([self.sock], [], [],
                                    max(0.0, deadline - time.monotonic()))
            if not r:
                continue
            try:
                data = self.sock.recv(1 << 20)
            except (ConnectionResetError, BrokenPipeError):
                data = b""
            if not data:
                self.eof = True
            total += len(data)
        return total, self.eof

    def listing(self, cmd, timeout=5.0):
        """Send a listing command; read `OK k` and k lines; return a list of
        dicts (key -> value). Raises AssertionError on another reply."""
        head = self.cmd(cmd, timeout)
        m = re.fullmatch(r"OK ([0-9]+)(?: .*)?", head)
        if not m:
            raise AssertionError("%s: expected 'OK <k>', got %r" %
                                 (cmd, head))
        return [parse_kv(ln) for ln in self.lines(int(m.group(1)), timeout)]

    def info(self, sem, timeout=5.0):
        """INFO sem parsed as a dict (AssertionError if not OK)."""
        r = self.cmd("INFO " + sem, timeout)
        if not r.startswith("OK "):
            raise AssertionError("INFO %s: got %r" % (sem, r))
        return parse_kv(r[3:])

    def stats(self, timeout=5.0):
        d = {}
        for row in self.listing("STATS", timeout):
            d.update(row)
        return d

    def close(self):
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def parse_kv(line):
    """'a=1 b=x' -> {'a': '1', 'b': 'x'} (keys in order)."""
    d = {}
    for w in line.split():
        k, sep, v = w.partition("=")
        if not sep:
            raise AssertionError("not a key=value word: %r in %r" % (w, line))
        d[k] = v
    return d


def connect(port, host="127.0.0.1", timeout=10.0, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return Conn(s)


def connect_unix(path, timeout=10.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    return Conn(s)


# --------------------------------------------------------------------------
# Running a script
# --------------------------------------------------------------------------

def _watchdog(signum, frame):
    _emit("FAIL - %s: watchdog: the script ran over its time limit" %
          (_current or "script"))
    for d in list(_live):
        _emit("# log of semd pid %d:\n%s" % (d.pid, _tail(d.log_text())))
    _stop_all()
    os._exit(1)


def run(*tests, time_limit=55):
    """Run test functions in order, report, exit 0 / 1 / 77."""
    global _current
    if not os.access(SEMD_BIN, os.X_OK):
        ok(False, "SEMD_BIN is an executable", "%r is not" % SEMD_BIN)
        sys.exit(1)
    signal.signal(signal.SIGALRM, _watchdog)
    signal.alarm(time_limit)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: (_stop_all(), os._exit(1)))
    for t in tests:
        _current = t.__name__
        note("--- %s" % t.__name__)
        try:
            t()
        except Skip as e:
            _current = ""
            _stop_all()
            note("skip: %s" % e)
            if _failed:
                sys.exit(1)
            print("SKIP: %s" % e)
            sys.exit(77)
        except Exception as e:
            first, _, rest = str(e).partition("\n")
            ok(False, "runs to the end", "%s: %s" % (type(e).__name__, first))
            if rest.strip():
                note(rest)
            note(traceback.format_exc())
        finally:
            for d in list(_live):
                d.stop()
    _current = ""
    signal.alarm(0)
    _stop_all()
    note("%d passed, %d failed" % (_passed, _failed))
    if _passed + _failed == 0:
        _emit("FAIL - no checks ran")
        sys.exit(1)
    sys.exit(1 if _failed else 0)
