#!/usr/bin/env python3
"""Many clients: 1000 connections at once all doing PING; concurrent
acquire/release from many threads never exceeds the capacity."""
import os
import random
import re
import resource
import selectors
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F403

NCONN = 1000


def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return True
    if hard != resource.RLIM_INFINITY and hard < need:
        return False
    target = need if hard == resource.RLIM_INFINITY else min(hard, 4 * need)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return True


def test_thousand_connections():
    # The daemon inherits the raised limit (it needs 1000+ descriptors).
    if not raise_nofile(NCONN + 200):
        skip("RLIMIT_NOFILE hard limit %r is below %d" %
             (resource.getrlimit(resource.RLIMIT_NOFILE)[1], NCONN + 200))
    with start_semd("--maxclients", "2000") as d:
        ctl = d.connect()
        socks = []
        try:
            for _ in range(NCONN):
                s = socket.create_connection(("127.0.0.1", d.port), 15)
                socks.append(s)
            ok(len(socks) == NCONN, "%d connections opened" % NCONN)
            for s in socks:
                s.sendall(b"PING\r\n")
            sel = selectors.DefaultSelector()
            bufs = {}
            for s in socks:
                s.setblocking(False)
                sel.register(s, selectors.EVENT_READ)
                bufs[s] = b""
            pending = set(socks)
            deadline = time.monotonic() + 30
            while pending and time.monotonic() < deadline:
                for key, _ in sel.select(timeout=1):
                    s = key.fileobj
                    try:
                        data = s.recv(4096)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        data = b""
                    bufs[s] += data
                    if not data or b"\n" in bufs[s]:
                        sel.unregister(s)
                        pending.discard(s)
            sel.close()
            good = sum(1 for s in socks if bufs[s] == b"OK PONG\r\n")
            eq(good, NCONN, "all %d connections got OK PONG" % NCONN)
            n = int(ctl.stats().get("connections", "0"))
            ok(n >= NCONN + 1, "STATS connections >= %d" % (NCONN + 1),
               "got %d" % n)
        finally:
            for s in socks:
                s.close()
        ok(wait_until(lambda: ctl.stats().get("connections") == "1", 20,
                      0.1), "all closed: STATS connections back to 1")
        expect(ctl, "PING", "OK PONG", "the daemon still answers")


def test_contention():
    cap, nthreads, rounds = 3, 16, 25
    with start_semd("--semaphore", "c", str(cap)) as d:
        lock = threading.Lock()
        state = {"held": 0, "max": 0, "errors": [], "tokens": []}

        def worker(seed):
            rnd = random.Random(seed)
            try:
                with connect(d.port) as c:
                    for _ in range(rounds):
                        n = rnd.randint(1, cap)
                        r = c.cmd("ACQUIRE c %d" % n, timeout=30)
                        m = re.fullmatch(r"OK ([0-9]+)", r)
                        if not m:
                            raise AssertionError("ACQUIRE c %d -> %r" % (n, r))
                        with lock:
                            state["held"] += n
                            state["max"] = max(state["max"], state["held"])
                            state["tokens"].append(int(m.group(1)))
                        time.sleep(rnd.random() * 0.002)
                        with lock:
                            state["held"] -= n
                        r = c.cmd("RELEASE c %s" % m.group(1), timeout=30)
                        if r != "OK":
                            raise AssertionError("RELEASE -> %r" % r)
            except Exception as e:
                with lock:
                    state["errors"].append("%s: %s" % (type(e).__name__, e))

        threads = [threading.Thread(target=worker, args=(i,), daemon=True)
                   for i in range(nthreads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(45)
        ok(not any(t.is_alive() for t in threads), "all workers finished")
        ok(not state["errors"], "no worker saw an unexpected reply",
           repr(state["errors"][:3]))
        ok(state["max"] <= cap, "weighted holders never exceed capacity %d"
           % cap, "max seen %d" % state["max"])
        toks = state["tokens"]
        eq(len(toks), nthreads * rounds, "every acquire was granted")
        eq(len(set(toks)), len(toks), "every token is unique")
        with connect(d.port) as c:
            expect(c, "INFO c", "OK name=c capacity=%d used=0 available=%d "
                   "holders=0 waiters=0" % (cap, cap), "all released")


if __name__ == "__main__":
    run(test_contention, test_thousand_connections)
