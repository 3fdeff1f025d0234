"""clienttest: what the tests of libsemc and semd-cli share, on top of
tests/semdtest.py (imported whole, so a test script needs only this).

    api("errors", port)       run tests/client/semc_api; its "ok -" and
                              "FAIL -" lines become this script's checks
    cli(port, "info", "jobs") run semd-cli: (status, stdout, stderr);
                              input="..." is its standard input (a pipe)
    free_port()               a TCP port nobody listens on (for now)
    Redis()                   a private redis-server, for persistence
    Fake()                    a scripted fake semd: subclass, answer()
"""
import atexit
import os
import socket
import subprocess
import sys
import tempfile
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F401,F403
import semdtest  # noqa: E402
import redistest  # noqa: E402

_BUILD = os.path.dirname(os.path.dirname(semdtest.SEMD_BIN))
SEMD_CLI = os.environ.get("SEMD_CLI") or os.path.join(
    _BUILD, "client", "semd-cli")
SEMC_API = os.environ.get("SEMC_API") or os.path.join(
    _BUILD, "tests", "client", "semc_api")
SEMC_GUARD = os.environ.get("SEMC_GUARD") or os.path.join(
    _BUILD, "client", "examples", "guard")


def no_sanitizer_report(text, what):
    """Fail (only) when a client's stderr has a sanitizer report."""
    found = [m for m in SANITIZER_MARKERS if m in text]
    if found:
        ok(False, "no sanitizer report from %s" % what, text[-3000:])


def relay(out, what):
    """Turn a helper's "ok - " / "FAIL - " lines into checks here."""
    for ln in out.splitlines():
        if ln.startswith("ok - "):
            ok(True, ln[5:])
        elif ln.startswith("FAIL - "):
            ok(False, ln[7:])
        else:
            note("%s: %s" % (what, ln))


CLIENT_ENV = ("SEMD_HOSTS", "SEMD_HOST", "SEMD_PORT", "SEMD_SOCKET",
              "SEMD_PASSWORD")


def client_env(env=None):
    """The environment for a client: none of ours, then env."""
    full_env = dict(os.environ)
    for k in CLIENT_ENV:
        full_env.pop(k, None)
    if env:
        full_env.update(env)
    return full_env


def api(*args, timeout=60, env=None):
    """Run semc_api ARGS; relay its checks; check it exited 0."""
    p = subprocess.run([SEMC_API] + [str(a) for a in args],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout,
                       env=client_env(env))
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    relay(out, "semc_api")
    no_sanitizer_report(err, "semc_api %s" % args[0])
    eq(p.returncode, 0, "semc_api %s exits 0" % args[0])
    if p.returncode != 0 and err:
        note(err[-2000:])


def cli_argv(port, *args):
    argv = [SEMD_CLI]
    if port is not None:
        argv += ["-p", str(port)]
    return argv + [str(a) for a in args]


def cli(port, *args, env=None, timeout=30, input=None):
    """Run semd-cli [-p PORT] ARGS: (status, stdout, stderr) as text."""
    full_env = client_env(env)
    stdin = {"input": input.encode()} if input is not None else {
        "stdin": subprocess.DEVNULL}
    p = subprocess.run(cli_argv(port, *args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout,
                       env=full_env, **stdin)
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    no_sanitizer_report(err, "semd-cli %s" % " ".join(map(str, args)))
    return p.returncode, out, err


class Fake:
    """A TCP server on 127.0.0.1 (or ::1) answering each request line with
    answer(words): a line, "" to close the connection, None for silence.
    requests lists every line received, in order. kill() closes the
    listener and every connection, as a semd killed with kill -9."""

    def __init__(self, family=socket.AF_INET):
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(("::1" if family == socket.AF_INET6 else
                        "127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.requests = []
        self.conns = []
        self.stopping = False
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def answer(self, words):
        return "ERR PROTO the fake does not know %s" % words[0]

    def verbs(self, verb):
        """The requests received with that verb."""
        return [r for r in self.requests if r.split()[0] == verb]

    def _accept(self):
        while not self.stopping:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                if self.stopping:
                    s.close()
                    return
                self.conns.append(s)
            threading.Thread(target=self._serve, args=(s,),
                             daemon=True).start()

    def _serve(self, s):
        buf = b""
        with s:
            while True:
                try:
                    data = s.recv(4096)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    ln, buf = buf.split(b"\n", 1)
                    words = ln.decode().split()
                    self.requests.append(" ".join(words))
                    reply = self.answer(words) if words else None
                    if reply == "":
                        return
                    if reply is not None:
                        try:
                            s.sendall(reply.encode() + b"\r\n")
                        except OSError:
                            return

    def close(self):
        self.stopping = True
        self.sock.close()

    def kill(self):
        with self.lock:
            self.close()
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class Redis(redistest.Redis):
    """A private redis-server on 127.0.0.1 and a free port, no disk
    writes; stopped by PID (context manager, and at exit): redistest's,
    the one Redis of the tests."""

    def __init__(self):
        super().__init__(appendonly=False)


def semd_supports(directive):
    """True if this semd knows --DIRECTIVE (checked with -t)."""
    status, out, err = run_semd("--" + directive, "x", "-t")
    return "unknown directive" not in err
