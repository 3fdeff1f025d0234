"""redistest: a private Redis and semd-with-persistence helpers for the
persistence tests (tests/persistence/) and the load benchmark.

It builds on semdtest (and re-exports it), so a test script does

    from redistest import *
    def test_x():
        with start_redis() as r:
            p = start_semd_redis(r, "--semaphore", "s", "2")
            c = p.connect()
            ...
            p.restart()                  # kill -9, start again, same port
            c = p.connect()
    run(test_x, time_limit=90)

Every redis-server is started on 127.0.0.1 and a free high port (never
6379), with its own directory, and is always stopped by PID: by the `with`
block, after each test function (run() below), at exit, and by semdtest's
watchdog. Running semds are stopped before the Redis servers, so that a
daemon shutting down still finds its store.

If redis-server is not installed the script FAILS (it does not skip):
scripts/install-deps.sh installs it.
"""

import atexit
import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
import semdtest  # noqa: E402
from semdtest import *  # noqa: E402,F401,F403
from semdtest import ok, note, wait_until, start_semd, _tail  # noqa: E402

REDIS_SERVER = os.environ.get("REDIS_SERVER") or shutil.which(
    "redis-server") or "redis-server"

PREFIX = "semd:"

_redis_live = []         # running Redis objects


class RedisError(Exception):
    """An error reply (-ERR ...) from Redis."""


# --------------------------------------------------------------------------
# A tiny RESP client
# --------------------------------------------------------------------------

class Resp:
    """One connection to Redis speaking RESP2. cmd("HGETALL", key) returns
    str / int / list / None, and raises RedisError on an error reply,
    OSError or EOFError when the server is gone."""

    def __init__(self, port, host="127.0.0.1", timeout=5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buf = b""

    @staticmethod
    def encode(*args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if not isinstance(a, bytes):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def _line(self):
        while b"\r\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("redis closed the connection")
            self.buf += data
        i = self.buf.index(b"\r\n")
        ln, self.buf = self.buf[:i], self.buf[i + 2:]
        return ln

    def _bytes(self, n):
        while len(self.buf) < n + 2:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("redis closed the connection")
            self.buf += data
        b, self.buf = self.buf[:n], self.buf[n + 2:]
        return b

    def reply(self):
        ln = self._line()
        kind, rest = ln[:1], ln[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._bytes(n).decode("latin-1")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RedisError("bad RESP reply %r" % ln)

    def cmd(self, *args):
        self.sock.sendall(self.encode(*args))
        return self.reply()

    def pipeline(self, cmds):
        """Send many commands at once, read every reply; errors are
        returned as RedisError objects, not raised."""
        self.sock.sendall(b"".join(self.encode(*c) for c in cmds))
        out = []
        for _ in cmds:
            try:
                out.append(self.reply())
            except RedisError as e:
                out.append(e)
        return out

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# --------------------------------------------------------------------------
# A private redis-server
# --------------------------------------------------------------------------

def require_redis(report=False):
    """A failing check (not a skip) when redis-server is missing; with
    report, an "ok" line when it is there."""
    found = os.access(REDIS_SERVER, os.X_OK) or shutil.which(REDIS_SERVER)
    if report or not found:
        ok(found, "redis-server is installed", "%r not found: run "
           "scripts/install-deps.sh (Debian package redis-server)" %
           REDIS_SERVER)
    if not found:
        raise RuntimeError("redis-server is not installed")


class Redis:
    """A private redis-server: .port, .pid, .dir, .cmd(...), .stop(),
    .kill(), .restart(empty=False), .pause(), .resume()."""

    def __init__(self, port=None, appendonly=True, fsync="always",
                 extra=(), timeout=15.0):
        require_redis()
        self.own_port = port is None    # ours to change if it is taken
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="redistest.")
        self.appendonly = appendonly
        self.fsync = fsync
        self.extra = list(extra)
        self.proc = None
        self.paused = False
        self._conn = None
        self.generation = 0
        self.start(timeout)

    # -- life cycle --
    def argv(self):
        a = [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(self.port),
             "--save", "", "--dir", self.dir, "--daemonize", "no",
             "--protected-mode", "yes", "--logfile", "",
             "--appendonly", "yes" if self.appendonly else "no",
             "--appendfsync", self.fsync]
        return a + self.extra

    def start(self, timeout=15.0):
        self.generation += 1
        self.log_path = os.path.join(self.dir, "redis.%d.log" %
                                     self.generation)
        self._logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                     stdout=self._logf, stderr=self._logf,
                                     close_fds=True, cwd=self.dir)
        self.pid = self.proc.pid
        self.paused = False
        if self not in _redis_live:
            _redis_live.append(self)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None and self.own_port and \
                    "Address already in use" in self.log_text() and \
                    self.generation < 5:
                # The free port was taken meanwhile: another one.
                self.port = free_port()
                return self.start(timeout)
            if self.proc.poll() is not None:
                raise RuntimeError("redis-server exited with status %s at "
                                   "start-up; log:\n%s" %
                                   (self.proc.returncode, _tail(
                                       self.log_text())))
            try:
                if self.cmd("PING") == "PONG":
                    return
            except (OSError, EOFError, RedisError):
                pass
            if time.monotonic() >= deadline:
                self.stop()
                raise RuntimeError("redis-server on port %d did not answer "
                                   "PING within %.0f s" %
                                   (self.port, timeout))
            time.sleep(0.05)

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        """Stop by PID (SIGCONT first if paused); SIGKILL after timeout.
        Returns the exit status."""
        self._drop_conn()
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                if self.paused and sig != signal.SIGKILL:
                    os.kill(self.pid, signal.SIGCONT)
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait()
        self.paused = False
        try:
            self._logf.close()
        except OSError:
            pass
        return self.proc.returncode

    def kill(self):
        """kill -9: the data is what the append-only file has."""
        return self.stop(signal.SIGKILL)

    def restart(self, empty=False, timeout=15.0):
        """Stop (if running) and start again on the same port, with the
        same directory (data kept) or, with empty=True, with no data."""
        if self.alive():
            self.stop()
        if empty:
            for name in os.listdir(self.dir):
                if not name.startswith("redis."):
                    p = os.path.join(self.dir, name)
                    if os.path.isdir(p):
                        shutil.rmtree(p, ignore_errors=True)
                    else:
                        os.unlink(p)
        self.start(timeout)

    def pause(self):
        """SIGSTOP: connections stay open, nothing is answered."""
        self._drop_conn()
        os.kill(self.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self):
        os.kill(self.pid, signal.SIGCONT)
        self.paused = False

    def close(self):
        self.stop()
        if self in _redis_live:
            _redis_live.remove(self)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- talking to it --
    def _drop_conn(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def cmd(self, *args):
        """One command on a cached connection (reconnects once)."""
        for attempt in (0, 1):
            try:
                if self._conn is None:
                    self._conn = Resp(self.port)
                return self._conn.cmd(*args)
            except (OSError, EOFError):
                self._drop_conn()
                if attempt:
                    raise

    def connect(self):
        return Resp(self.port)

    def addr(self):
        return "127.0.0.1:%d" % self.port


def start_redis(**kw):
    """Start a private redis-server (see Redis) and wait for PING."""
    return Redis(**kw)


class Replica(Redis):
    """A private replica of master (a Redis): `redis-server --replicaof
    127.0.0.1 M --save '' --appendonly no` on its own free port, stopped
    by PID like any Redis here. start() (and so restart()) returns once
    its link to the master is up and the first sync is done. With via (a
    Proxy to the master), it replicates through that proxy, so that a
    test can make it lag (via.pause()). With appendonly, it keeps an
    append-only file, so that a promoted replica restarted keeps what it
    had (the Sentinel tests)."""

    def __init__(self, master, via=None, appendonly=False, timeout=30.0):
        self.master = master
        # The master's first sync would wait 5 s for more replicas.
        master.cmd("CONFIG", "SET", "repl-diskless-sync-delay", "0")
        super().__init__(appendonly=appendonly, extra=(
            "--replicaof", "127.0.0.1",
            str(via.port if via is not None else master.port)),
            timeout=timeout)

    def start(self, timeout=30.0):
        super().start(timeout)
        if not wait_until(self.link_up, timeout, 0.05):
            self.stop()
            raise RuntimeError("replica on port %d: no link to its master "
                               "(port %d) within %.0f s; log:\n%s" %
                               (self.port, self.master.port, timeout,
                                _tail(self.log_text())))

    def link_up(self):
        try:
            info = self.cmd("INFO", "replication") or ""
        except (OSError, EOFError, RedisError):
            return False
        return "master_link_status:up" in info


def start_replica(master, **kw):
    """Start a replica of master (see Replica), synced."""
    return Replica(master, **kw)


def connected_replicas(r):
    """connected_slaves of r's INFO replication: how many replicas the
    master sees now."""
    for ln in (r.cmd("INFO", "replication") or "").splitlines():
        if ln.startswith("connected_slaves:"):
            return int(ln.split(":", 1)[1])
    return 0


# --------------------------------------------------------------------------
# Reading semd's keys
# --------------------------------------------------------------------------

def parse_grant_value(v):
    """'n=2 kind=lease deadline_ms=123' -> {'n': 2, 'kind': 'lease',
    'deadline_ms': 123}."""
    d = {}
    for w in v.split():
        k, _, x = w.partition("=")
        d[k] = int(x) if x.isdigit() else x
    return d


def redis_state(r, prefix=PREFIX):
    """semd's data in Redis: {'tokens': int or None,
    'sems': {name: {'capacity': int or None,
                    'grants': {token(int): {'n':..,'kind':..,
                                            'deadline_ms':..}}}}}."""
    tok = r.cmd("GET", prefix + "tokens")
    st = {"tokens": int(tok) if tok is not None else None, "sems": {}}
    for name in r.cmd("SMEMBERS", prefix + "sems") or []:
        h = pairs(r.cmd("HGETALL", "%s{%s}:sem" % (prefix, name)))
        g = pairs(r.cmd("HGETALL", "%s{%s}:grants" % (prefix, name)))
        st["sems"][name] = {
            "capacity": int(h["capacity"]) if "capacity" in h else None,
            "grants": {int(k): parse_grant_value(v) for k, v in g.items()}}
    return st


def pairs(flat):
    flat = flat or []
    return dict(zip(flat[0::2], flat[1::2]))


def redis_tokens(r, sem, prefix=PREFIX):
    """The sorted tokens of sem's grants hash in Redis."""
    return sorted(int(t) for t in
                  r.cmd("HKEYS", "%s{%s}:grants" % (prefix, sem)) or [])


def wait_redis_tokens(r, sem, tokens, desc, timeout=10):
    """Check that Redis comes to hold exactly these grants of sem (the
    writes of RELEASE and the like go with the next batch)."""
    want = sorted(tokens)
    good = wait_until(lambda: redis_tokens(r, sem) == want, timeout, 0.05)
    return ok(good, desc, None if good else "Redis has %s, expected %s" %
              (attempt(redis_tokens, r, sem), want))


def holders(c, sem):
    """HOLDERS sem as {token(int): {'n':.., 'kind':.., 'owner':..,
    'ttl_ms':..}}."""
    return {int(h["token"]): h for h in c.listing("HOLDERS " + sem)}


def memory_state(c):
    """What semd holds, in redis_state()'s shape (without deadlines):
    {name: {'capacity': int, 'grants': {token: (n, kind)}}}."""
    out = {}
    for row in c.listing("LIST"):
        name = row["name"]
        out[name] = {"capacity": int(row["capacity"]),
                     "grants": {t: (int(h["n"]), h["kind"]) for t, h in
                                holders(c, name).items()}}
    return out


def redis_as_memory(r, prefix=PREFIX):
    """redis_state() in memory_state()'s shape, for comparisons."""
    return {name: {"capacity": s["capacity"],
                   "grants": {t: (g.get("n"), g.get("kind"))
                              for t, g in s["grants"].items()}}
            for name, s in redis_state(r, prefix)["sems"].items()}


def token_of(c, req, timeout=5.0):
    """Send req; return the token of its `OK <token>` reply, or raise
    AssertionError with the reply (for loops that should not print one
    check per request)."""
    got = c.cmd(req, timeout)
    m = re.fullmatch(r"OK ([0-9]+)", got)
    if not m:
        raise AssertionError("%s: got %r, expected OK <token>" % (req, got))
    return int(m.group(1))


def attempt(f, *args):
    """repr(f(*args)), or the exception it raised: for failure details
    that must not raise themselves."""
    try:
        return repr(f(*args))
    except Exception as e:
        return "<%s: %s>" % (type(e).__name__, e)


def stats_of(c):
    try:
        return c.stats()
    except Exception:
        return {}


def wait_persistence(c, state, timeout=20):
    """Poll STATS until persistence=state (ok, down); returns the last
    STATS seen."""
    last = {}

    def pred():
        last.clear()
        last.update(stats_of(c))
        return last.get("persistence") == state
    wait_until(pred, timeout, 0.1)
    return last


# --------------------------------------------------------------------------
# semd with persistence
# --------------------------------------------------------------------------

class PSemd:
    """A semd started against a Redis, restartable on the same port with
    the same arguments: .d is the running semdtest.Semd."""

    def __init__(self, r, args, grace="2s", port=0, timeout=30.0,
                 start=True, env=None):
        self.redis_args = ["--redis", r.addr()]
        self.env = env
        if grace is not None:
            self.redis_args += ["--reclaim-grace", grace]
        self.args = list(args)
        self.timeout = timeout
        self.restarts = 0
        self.d = None
        self.port = port
        if start:
            self.start()

    def start(self, wait_ready=True):
        self.d = start_semd(*(self.redis_args + self.args +
                              ["--port", str(self.port)]),
                            timeout=self.timeout, wait_ready=wait_ready,
                            env=self.env)
        if wait_ready:
            self.port = self.d.port
        return self.d

    def wait_ready(self, timeout=None):
        """After start(wait_ready=False): wait for `listening on` and
        `ready` (semd loads its store before it listens)."""
        self.d._wait_ready("127.0.0.1", timeout or self.timeout)
        self.port = self.d.port

    def kill9(self):
        """kill -9 by PID; checks it died of it and its log has no
        sanitizer report."""
        d = self.d
        d.check_exit = False
        status = d.stop(sig=signal.SIGKILL)
        ok(status == -signal.SIGKILL, "semd pid %d was alive until kill -9"
           % d.pid, "exit status %s before the kill; log tail:\n%s" %
           (status, _tail(d.log_text())))
        return status

    def restart(self):
        """kill -9, then start again on the same port and arguments."""
        self.kill9()
        self.restarts += 1
        return self.start()

    def connect(self, **kw):
        return self.d.connect(**kw)

    def stop(self, sig=signal.SIGTERM):
        return self.d.stop(sig=sig)

    def log_text(self):
        return self.d.log_text()


def start_semd_redis(r, *args, grace="2s", timeout=30.0):
    """semd --redis 127.0.0.1:PORT --reclaim-grace GRACE ARGS... on a
    free port; returns a PSemd (restart() keeps the port)."""
    return PSemd(r, args, grace=grace, timeout=timeout)


def log_tail(text, n=30):
    """The last n lines of a log, indented for a check's details."""
    return _tail(text, n)


def loaded_line(text):
    """The numbers of semd's `loaded S semaphores, G grants (U unowned)
    in T ms` log line: dict or None."""
    m = None
    for m in re.finditer(r"loaded (\d+) semaphores?, (\d+) grants? "
                         r"\((\d+) unowned\) in (\d+(?:\.\d+)?) ?ms", text):
        pass
    if not m:
        return None
    return {"sems": int(m.group(1)), "grants": int(m.group(2)),
            "unowned": int(m.group(3)), "ms": float(m.group(4))}


# --------------------------------------------------------------------------
# Cleanup and running
# --------------------------------------------------------------------------

def _stop_all_redis():
    for r in list(_redis_live):
        try:
            r.close()
        except Exception:
            try:
                os.kill(r.pid, signal.SIGKILL)
            except OSError:
                pass


_semd_stop_all = semdtest._stop_all


def _stop_everything():
    """Every semd first (it may flush to its store), then every Redis."""
    _semd_stop_all()
    _stop_all_redis()


# semdtest's watchdog and signal handlers call its module-global _stop_all
# at the time they fire: make them stop the Redis servers too.
semdtest._stop_all = _stop_everything
atexit.register(_stop_everything)    # runs before semdtest's (LIFO)


def _with_cleanup(t):
    @functools.wraps(t)
    def wrapper():
        try:
            t()
        finally:
            _cont_stopped()
            for d in list(semdtest._live):
                d.stop()
            _stop_all_redis()
    return wrapper


def run(*tests, time_limit=120):
    """semdtest.run, but each test's Redis servers are stopped after its
    semds, whatever happens; a missing redis-server is a failure."""
    try:
        require_redis(report=True)
    except RuntimeError:
        sys.exit(1)
    semdtest.run(*[_with_cleanup(t) for t in tests], time_limit=time_limit)


# --------------------------------------------------------------------------
# Ownership, standby and failover (issue 7)
# --------------------------------------------------------------------------

def role_of(c, timeout=5.0):
    """ROLE parsed: {'role': .., 'epoch': int, 'owner': ..}; raises
    AssertionError on another reply."""
    return role_reply(c.cmd("ROLE", timeout))


def role_reply(got):
    """A ROLE reply parsed as role_of() does (AssertionError on another
    reply, None included)."""
    m = re.fullmatch(r"OK role=(\S+) epoch=([0-9]+) owner=(\S+)(?: .*)?",
                     got or "")
    if not m:
        raise AssertionError("ROLE: got %r, expected 'OK role=.. epoch=.. "
                             "owner=..'" % (got,))
    return {"role": m.group(1), "epoch": int(m.group(2)),
            "owner": m.group(3)}


def role_at(port, timeout=2.0):
    """ROLE of the semd on port from a fresh connection, or None if it
    cannot be asked (not listening, closed, no answer)."""
    try:
        c = connect(port, timeout=timeout)
    except OSError:
        return None
    try:
        return role_of(c, timeout)
    except (OSError, ConnClosed, ReplyTimeout, AssertionError):
        return None
    finally:
        c.close()


def wait_role(port, role, timeout=10.0, interval=0.02):
    """Poll ROLE until it says role; returns (ROLE dict, monotonic time it
    was first seen) or (last ROLE seen, None)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = role_at(port) or last
        if last is not None and last["role"] == role:
            return last, time.monotonic()
        if time.monotonic() >= deadline:
            return last, None
        time.sleep(interval)


def standby_reply(got):
    """The owner=, epoch= words of an `ERR STANDBY owner=X epoch=N ...`
    reply as (owner, epoch), or None if got is not one."""
    m = re.fullmatch(r"ERR STANDBY owner=(\S+) epoch=([0-9]+)(?: .*)?",
                     got or "")
    return (m.group(1), int(m.group(2))) if m else None


def owner_key(r, prefix=PREFIX):
    """`P owner` split as (epoch, instance id, addr), or None."""
    v = r.cmd("GET", prefix + "owner")
    if v is None:
        return None
    w = v.split()
    return (int(w[0]) if w and w[0].isdigit() else w[0],) + tuple(w[1:])


def ownership_args(lease="1500ms", standby=False):
    return ["--owner-lease", lease, "--standby", "yes" if standby else "no"]


class Proxy:
    """A TCP forwarder on 127.0.0.1:.port to 127.0.0.1:target, in a thread
    of the test, for cutting a daemon off from Redis: pause() stops moving
    bytes both ways and accepting connections, without closing anything
    (a partition: the peers see silence); resume() moves them again.
    cut_replies() is a one-way partition: what the daemon sends still
    reaches Redis (its writes land), what Redis answers is read and thrown
    away (the daemon hears nothing); heal() forwards both ways again.
    close() closes every socket."""

    def __init__(self, target):
        import selectors
        import threading
        self.target = target
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(128)
        self.lsock.setblocking(False)
        self.port = self.lsock.getsockname()[1]
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.lsock, selectors.EVENT_READ, None)
        self.peer = {}              # socket -> the socket it forwards to
        self.upstream = set()       # the sockets connected to target
        self.paused = False
        self.drop_replies = False   # one way: target -> client dropped
        self.dropped = 0            # bytes thrown away since the cut
        self.done = False
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._loop, daemon=True,
                                       name="proxy%d" % self.port)
        self.thread.start()
        _proxies.append(self)

    def addr(self):
        return "127.0.0.1:%d" % self.port

    def pause(self):
        with self.lock:
            self.paused = True

    def resume(self):
        with self.lock:
            self.paused = False

    def cut_replies(self):
        with self.lock:
            self.drop_replies = True
            self.dropped = 0

    def heal(self):
        with self.lock:
            self.drop_replies = False

    def _drop(self, s):
        o = self.peer.pop(s, None)
        for x in (s, o):
            if x is None:
                continue
            try:
                self.sel.unregister(x)
            except (KeyError, ValueError):
                pass
            x.close()
        if o is not None:
            self.peer.pop(o, None)
        self.upstream.discard(s)
        self.upstream.discard(o)

    def _accept(self):
        import selectors
        try:
            a, _ = self.lsock.accept()
        except OSError:
            return
        try:
            b = socket.create_connection(("127.0.0.1", self.target), 5)
        except OSError:
            a.close()
            return
        for s in (a, b):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.peer[a], self.peer[b] = b, a
        self.upstream.add(b)
        self.sel.register(a, selectors.EVENT_READ, None)
        self.sel.register(b, selectors.EVENT_READ, None)

    def _forward(self, s):
        try:
            data = s.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        o = self.peer.get(s)
        if not data or o is None:
            self._drop(s)
            return
        with self.lock:
            lost = self.drop_replies and s in self.upstream
            if lost:
                self.dropped += len(data)
        if lost:
            return
        try:
            o.setblocking(True)
            o.settimeout(5)
            o.sendall(data)
            o.setblocking(False)
        except OSError:
            self._drop(s)

    def _loop(self):
        while not self.done:
            with self.lock:
                paused = self.paused
            if paused:
                time.sleep(0.005)
                continue
            for key, _ in self.sel.select(0.02):
                with self.lock:
                    if self.paused or self.done:
                        break
                if key.fileobj is self.lsock:
                    self._accept()
                elif key.fileobj in self.peer:
                    self._forward(key.fileobj)

    def close(self):
        self.done = True
        self.thread.join(2)
        for s in list(self.peer):
            self._drop(s)
        try:
            self.sel.unregister(self.lsock)
        except (KeyError, ValueError):
            pass
        self.lsock.close()
        if self in _proxies:
            _proxies.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


_proxies = []


def semd_must_exit(*args, timeout=15.0):
    """Start `semd --bind 127.0.0.1 --port 0 ARGS...` expecting it to stop
    by itself at start-up: returns (exit status or None if it was still
    running after timeout and had to be stopped, its log). The log is
    checked for sanitizer reports."""
    d = start_semd(*args, wait_ready=False)
    d.check_exit = False
    try:
        d.proc.wait(timeout=timeout)
        status = d.proc.returncode
    except subprocess.TimeoutExpired:
        status = None
    d.stop()
    return status, d.log_text()


def poll_grant(port, req, timeout=15.0, interval=0.01):
    """Send req (a TRY/ACQUIRE) to the semd on port until it answers
    `OK <token>` (reconnecting when refused or closed): returns (token,
    monotonic time the reply was read, last other reply seen); token is
    None if no grant came within timeout."""
    deadline = time.monotonic() + timeout
    c = None
    last = None
    try:
        while time.monotonic() < deadline:
            if c is None:
                try:
                    c = connect(port, timeout=1.0)
                except OSError as e:
                    last = "connect: %s" % e
                    time.sleep(interval)
                    continue
            try:
                got = c.cmd(req, 2.0)
            except (OSError, ConnClosed, ReplyTimeout) as e:
                last = "%s: %s" % (type(e).__name__, e)
                c.close()
                c = None
                continue
            m = re.fullmatch(r"OK ([0-9]+)", got)
            if m:
                return int(m.group(1)), time.monotonic(), last
            last = got
            time.sleep(interval)
        return None, None, last
    finally:
        if c is not None:
            c.close()


# --------------------------------------------------------------------------
# Failover safety (issue 16): a pair on one data set, a paused or busy
# owner, a skewed wall clock
# --------------------------------------------------------------------------

def start_pair(r, args, lease="1s", grace="2s", owner_redis=None,
               standby_redis=None, standby_env=None, owner_env=None):
    """Two semd on r's data set, both `standby yes`: the owner first, then
    the standby (each may reach Redis through its own Proxy: owner_redis,
    standby_redis). Returns (owner, standby) PSemds, checked by ROLE."""
    a = PSemd(owner_redis or r, list(args) + ownership_args(lease, True),
              grace=grace, env=owner_env)
    ro, t = wait_role(a.port, "owner", 10)
    ok(t is not None, "the first semd is the owner", repr(ro))
    b = PSemd(standby_redis or r, list(args) + ownership_args(lease, True),
              grace=grace, env=standby_env)
    ro, t = wait_role(b.port, "standby", 10)
    ok(t is not None, "the second semd is its standby", repr(ro))
    return a, b


def sigstop(p):
    """SIGSTOP a PSemd's process (by PID); sigcont() undoes it. A stopped
    semd is continued before it is stopped at the end (Semd.stop sends
    SIGTERM, which a stopped process only acts on once continued)."""
    os.kill(p.d.pid, signal.SIGSTOP)
    p.d.stopped_by_test = True


def sigcont(p):
    if p.d.alive():
        os.kill(p.d.pid, signal.SIGCONT)
    p.d.stopped_by_test = False


def _cont_stopped():
    for d in list(semdtest._live):
        if getattr(d, "stopped_by_test", False) and d.alive():
            try:
                os.kill(d.pid, signal.SIGCONT)
            except OSError:
                pass


_stop_everything_before_cont = _stop_everything


def _stop_everything_cont():
    _cont_stopped()
    _stop_everything_before_cont()


semdtest._stop_all = _stop_everything_cont
atexit.register(_cont_stopped)      # LIFO: before the stops above


class Stall:
    """Busy a semd's event loop: conns connections each pipeline `lines`
    copies of `request` (default LIST) and never read, so the daemon
    spends its turns building replies nobody reads. The connections are
    made at once, the flood starts with start() (or at once with
    start=True); close() closes them. What a busy loop costs is the
    daemon's business; this only makes one."""

    def __init__(self, port, conns=100, lines=2000, request="LIST",
                 start=True):
        import threading
        self.socks = []
        self.sent = 0
        self.done = False
        payload = (request + "\r\n").encode() * lines
        for _ in range(conns):
            try:
                s = socket.create_connection(("127.0.0.1", port), 5)
            except OSError:
                break
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.setblocking(False)
            self.socks.append(s)
        self.payload = payload
        self.thread = threading.Thread(target=self._push, daemon=True)
        if start:
            self.start()

    def start(self):
        self.thread.start()

    def _push(self):
        import selectors
        sel = selectors.DefaultSelector()
        left = {}
        for s in self.socks:
            left[s] = self.payload
            sel.register(s, selectors.EVENT_WRITE)
        end = time.monotonic() + 60
        while left and not self.done and time.monotonic() < end:
            for key, _ in sel.select(0.05):
                s = key.fileobj
                try:
                    n = s.send(left[s][:65536])
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    n = len(left[s])
                self.sent += n
                left[s] = left[s][n:]
                if not left[s]:
                    sel.unregister(s)
                    del left[s]
        sel.close()

    def close(self):
        self.done = True
        if self.thread.ident is not None:
            self.thread.join(2)
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass
        self.socks = []


FAKETIME_LIB = os.environ.get("FAKETIME_LIB") or \
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def faketime_env(offset):
    """The environment that runs a semd with only its wall clock moved by
    offset (e.g. "+50s"), its monotonic clock true; None if libfaketime is
    not installed. With an AddressSanitizer build, ASan must not insist on
    coming first in the link order (the other ASAN_OPTIONS are kept)."""
    if not os.path.exists(FAKETIME_LIB):
        return None
    env = {"LD_PRELOAD": FAKETIME_LIB, "FAKETIME": offset,
           "FAKETIME_DONT_FAKE_MONOTONIC": "1",
           "FAKETIME_NO_CACHE": "1"}
    if semdtest.sanitized(semdtest.SEMD_BIN):
        opts = os.environ.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + \
            "verify_asan_link_order=0"
    return env


def log_count(p, text):
    """How many lines of p's log contain text."""
    return sum(1 for ln in p.d.log_lines() if text in ln)


# --------------------------------------------------------------------------
# Redis Sentinel (issue 19): a master, replicas and sentinels, each a
# private process on 127.0.0.1 stopped by PID like any Redis here
# --------------------------------------------------------------------------

REDIS_SENTINEL = os.environ.get("REDIS_SENTINEL") or shutil.which(
    "redis-sentinel") or "/usr/bin/redis-sentinel"

MASTER_NAME = "semdmaster"


class Sentinel(Redis):
    """A private redis-sentinel monitoring master (a Redis) as name, with
    quorum 2 and short timeouts: down-after-milliseconds down_after_ms,
    failover-timeout failover_ms. With password, clients (and the other
    sentinels) must AUTH with it. Its config file (which it rewrites) is
    in its own directory."""

    def __init__(self, master, name=MASTER_NAME, down_after_ms=1000,
                 failover_ms=5000, quorum=2, password=None, timeout=15.0):
        if not (os.access(REDIS_SENTINEL, os.X_OK) or
                shutil.which(REDIS_SENTINEL)):
            ok(False, "redis-sentinel is installed", "%r not found: run "
               "scripts/install-deps.sh (Debian package redis-sentinel)" %
               REDIS_SENTINEL)
            raise RuntimeError("redis-sentinel is not installed")
        self.master_port = master.port
        self.name = name
        self.down_after_ms = down_after_ms
        self.failover_ms = failover_ms
        self.quorum = quorum
        self.password = password
        self._conf_port = None
        super().__init__(appendonly=False, timeout=timeout)

    def argv(self):
        conf = os.path.join(self.dir, "sentinel.conf")
        if self._conf_port != self.port:
            with open(conf, "w") as f:
                f.write("port %d\nbind 127.0.0.1\ndaemonize no\n"
                        "protected-mode no\ndir %s\nlogfile \"\"\n"
                        "sentinel monitor %s 127.0.0.1 %d %d\n"
                        "sentinel down-after-milliseconds %s %d\n"
                        "sentinel failover-timeout %s %d\n"
                        "sentinel parallel-syncs %s 1\n" %
                        (self.port, self.dir, self.name, self.master_port,
                         self.quorum, self.name, self.down_after_ms,
                         self.name, self.failover_ms, self.name))
                if self.password:
                    f.write("requirepass %s\nsentinel sentinel-pass %s\n"
                            % (self.password, self.password))
            self._conf_port = self.port
        return [REDIS_SENTINEL, conf]

    def cmd(self, *args):
        """Redis.cmd, AUTHenticated first when a password is set."""
        for attempt in (0, 1):
            try:
                if self._conn is None:
                    self._conn = Resp(self.port)
                    if self.password:
                        self._conn.cmd("AUTH", self.password)
                return self._conn.cmd(*args)
            except (OSError, EOFError):
                self._drop_conn()
                if attempt:
                    raise

    def master_addr(self):
        """What this sentinel says the master is: "127.0.0.1:P" or None."""
        got = self.cmd("SENTINEL", "get-master-addr-by-name", self.name)
        return "%s:%s" % (got[0], got[1]) if got else None


def sentinels_agree(sentinels, nreplicas):
    """Every sentinel sees nreplicas replicas and all the other sentinels
    (so a quorum can vote and the replica can be promoted)."""
    n = len(sentinels)
    for s in sentinels:
        try:
            if len(s.cmd("SENTINEL", "replicas", s.name) or []) < nreplicas:
                return False
            if len(s.cmd("SENTINEL", "sentinels", s.name) or []) < n - 1:
                return False
        except (OSError, EOFError, RedisError):
            return False
    return True


def start_sentinel_group(nsentinels=3, down_after_ms=1000, failover_ms=5000,
                         password=None):
    """A master, one replica and nsentinels sentinels that know each other
    and the replica: (master, replica, [sentinels])."""
    m = start_redis()
    rep = start_replica(m, appendonly=True)
    ss = [Sentinel(m, down_after_ms=down_after_ms, failover_ms=failover_ms,
                   password=password) for _ in range(nsentinels)]
    agreed = wait_until(lambda: sentinels_agree(ss, 1), 30, 0.1)
    ok(agreed, "%d sentinels see the master, the replica and each other"
       % nsentinels, None if agreed else
       "\n".join(attempt(s.cmd, "SENTINEL", "sentinels", s.name)
                 for s in ss))
    return m, rep, ss


def sentinel_url(sentinels, name=MASTER_NAME):
    return "sentinel://%s/%s" % (",".join(s.addr() for s in sentinels), name)


class SentinelAddr:
    """What PSemd needs of a Redis (addr()), for a sentinel:// address."""

    def __init__(self, sentinels, name=MASTER_NAME):
        self.url = sentinel_url(sentinels, name)

    def addr(self):
        return self.url
