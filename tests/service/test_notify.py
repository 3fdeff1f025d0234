#!/usr/bin/env python3
"""sd_notify against a fake NOTIFY_SOCKET (a Unix datagram socket of the
test): READY=1 only once the port accepts connections (and not while semd
waits for Redis, which it reports in STATUS=), RELOADING=1 then READY=1
around a SIGHUP, STOPPING=1 on SIGTERM. Skipped when semd was built
without libsystemd (configure found none: Type=simple)."""
import os
import select
import signal
import socket
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403

TMP = tempfile.mkdtemp(prefix="semdtest.")


class Notify:
    """The service manager's end: a datagram socket at a path."""

    def __init__(self, name):
        self.path = os.path.join(TMP, name)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.msgs = []

    def recv(self, timeout):
        """The next message as a dict, or None within timeout."""
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return None
        data = self.sock.recv(65536).decode()
        msg = dict(ln.split("=", 1) for ln in data.split("\n") if "=" in ln)
        self.msgs.append(msg)
        return msg

    def wait_for(self, key, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self.recv(deadline - time.monotonic())
            if m is not None and key in m:
                return m
        return None

    def close(self):
        self.sock.close()


def accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False


def test_ready_reload_stop():
    n = Notify("notify1")
    port = free_port()
    d = start_semd("--port", str(port), "--semaphore", "s", "1",
                   env={"NOTIFY_SOCKET": n.path}, wait_ready=False)
    m = n.wait_for("READY")
    ok(m is not None and m["READY"] == "1", "READY=1 is sent", n.msgs)
    ok(accepts(port), "when READY=1 arrives, the port accepts")
    ok(m is not None and m.get("STATUS") == "serving", "STATUS=serving")
    os.kill(d.pid, signal.SIGHUP)
    m1 = n.wait_for("RELOADING")
    ok(m1 is not None and m1["RELOADING"] == "1" and
       "MONOTONIC_USEC" in m1, "SIGHUP: RELOADING=1 (with MONOTONIC_USEC)",
       n.msgs)
    m2 = n.wait_for("READY")
    ok(m2 is not None and m2["READY"] == "1", "then READY=1", n.msgs)
    d.stop()
    m3 = n.wait_for("STOPPING", timeout=5)
    ok(m3 is not None and m3["STOPPING"] == "1", "SIGTERM: STOPPING=1",
       n.msgs)
    n.close()


def test_not_ready_while_waiting_for_redis():
    n = Notify("notify2")
    rport = free_port()
    port = free_port()
    d = start_semd("--port", str(port), "--redis", "127.0.0.1:%d" % rport,
                   "--reclaim-grace", "1s", env={"NOTIFY_SOCKET": n.path},
                   wait_ready=False)
    m = n.wait_for("STATUS", timeout=10)
    ok(m is not None and "redis 127.0.0.1:%d" % rport in m["STATUS"] and
       "READY" not in m, "STATUS= says semd waits for Redis", n.msgs)
    early = n.wait_for("READY", timeout=1.5)
    ok(early is None, "no READY=1 while Redis is down", n.msgs)
    ok(not accepts(port), "and the port does not accept yet")
    # SIGHUP before it is ready: no RELOADING/READY that would tell
    # systemd it has started.
    os.kill(d.pid, signal.SIGHUP)
    wait_until(lambda: "received SIGHUP" in d.log_text())
    early = n.wait_for("READY", timeout=1)
    ok(early is None, "a SIGHUP before start-up sends no READY=1", n.msgs)
    with start_redis(port=rport):
        m = n.wait_for("READY", timeout=30)
        ok(m is not None, "READY=1 once Redis is there", n.msgs)
        ok(accepts(port), "and the port accepts")
        d.stop()
    n.close()


if os.environ.get("SEMD_SERVICE_TYPE", "notify") != "notify":
    print("# semd was built without libsystemd (Type=simple): no sd_notify")
    sys.exit(77)
run(test_ready_reload_stop, test_not_ready_while_waiting_for_redis)
