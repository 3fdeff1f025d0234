#!/usr/bin/env python3
"""The synchronous Python client (client/python) against a real semd:
FIFO and weights seen from Python, the context manager releasing on an
exception, a lease refreshed past its length, permit.lost set within a
round trip of a REVOKE (measured and printed), the typed exceptions,
@client.limited, threads never holding more than the capacity, NAME and
AUTH."""

import statistics
import threading
import time
import unittest
from datetime import timedelta

import pyunit
import semd
from semdtest import connect, note, start_semd, wait_until

BOUND = 10.0            # generous bound for anything that should be fast


def addr(d):
    return "127.0.0.1:%d" % d.port


def used(c, sem):
    return int(c.info(sem)["used"])


class Fifo(unittest.TestCase):
    def test_fifo_and_weights(self):
        """A big request at the head blocks a smaller one behind it; each
        is granted in arrival order once there is room."""
        with start_semd("--semaphore", "w", "3") as d:
            c = semd.Client(addr(d))
            holder = c.acquire("w", 2)
            order, granted = [], {}

            def waiter(tag, n):
                p = c.acquire("w", n, timeout=30)
                order.append(tag)
                granted[tag] = p

            big = threading.Thread(target=waiter, args=("big", 2))
            big.start()
            self.assertTrue(wait_until(lambda: len(c.waiters("w")) == 1,
                                       BOUND), "the big request waits")
            small = threading.Thread(target=waiter, args=("small", 1))
            small.start()
            self.assertTrue(wait_until(lambda: len(c.waiters("w")) == 2,
                                       BOUND), "the small one queues too")
            self.assertEqual([w["n"] for w in c.waiters("w")], ["2", "1"])
            self.assertEqual(order, [], "1 is free, but the small request "
                             "waits behind the big one (FIFO)")
            holder.release()
            big.join(BOUND)
            small.join(BOUND)
            # Both are granted in one turn: the tokens tell the order.
            self.assertEqual(sorted(order), ["big", "small"])
            self.assertLess(granted["big"].token, granted["small"].token,
                            "the big request was granted first")
            self.assertEqual(used(c, "w"), 3)
            for p in granted.values():
                p.release()
            self.assertEqual(used(c, "w"), 0)
            c.close()

    def test_threads_never_exceed_capacity(self):
        """20 threads of one client on a capacity-3 semaphore."""
        with start_semd("--semaphore", "t", "3") as d:
            c = semd.Client(addr(d))
            lock = threading.Lock()
            state = {"now": 0, "max": 0, "done": 0}

            def worker():
                for _ in range(10):
                    with c.acquire("t", timeout=30):
                        with lock:
                            state["now"] += 1
                            state["max"] = max(state["max"], state["now"])
                        time.sleep(0.001)
                        with lock:
                            state["now"] -= 1
                with lock:
                    state["done"] += 1

            ts = [threading.Thread(target=worker) for _ in range(20)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(60)
            self.assertEqual(state["done"], 20)
            self.assertLessEqual(state["max"], 3)
            note("20 threads x 10 permits: at most %d held at once"
                 % state["max"])
            self.assertEqual(used(c, "t"), 0)
            c.close()


class ContextManager(unittest.TestCase):
    def test_releases_on_exception(self):
        with start_semd("--semaphore", "db", "1") as d:
            c = semd.Client(addr(d))
            with self.assertRaises(ZeroDivisionError):
                with c.acquire("db", timeout=5) as p:
                    self.assertEqual(used(c, "db"), 1)
                    1 / 0
            self.assertTrue(p.released)
            self.assertEqual(used(c, "db"), 0, "released on the exception")
            with c.acquire("db", timeout=timedelta(seconds=5)) as q:
                self.assertGreater(q.token, p.token, "tokens increase")
            self.assertEqual(used(c, "db"), 0)
            c.close()

    def test_bound_permit_released_by_close(self):
        """A permit bound to its connection goes when the client does
        (as when the process dies)."""
        with start_semd("--semaphore", "db", "1") as d:
            c = semd.Client(addr(d))
            c.acquire("db")
            c2 = semd.Client(addr(d))
            self.assertIsNone(c2.try_acquire("db"))
            c.close()
            p2 = c2.acquire("db", timeout=BOUND)
            p2.release()
            c2.close()


class Leases(unittest.TestCase):
    def test_lease_refreshed_past_its_length(self):
        with start_semd("--semaphore", "l", "1") as d:
            c = semd.Client(addr(d))
            p = c.acquire("l", lease=1.5)
            self.assertEqual(p.lease, 1.5)
            deadline = time.monotonic() + 4.5       # three leases
            while time.monotonic() < deadline:
                self.assertFalse(p.lost.wait(0.2), p.lost_reason)
            self.assertEqual(c.check("l", p.token)["kind"], "lease")
            h = c.holders("l")
            self.assertEqual([x["token"] for x in h], [str(p.token)])
            p.release()
            self.assertEqual(used(c, "l"), 0)
            c.close()

    def test_lease_outlives_its_connection(self):
        with start_semd("--semaphore", "l", "1") as d:
            c = semd.Client(addr(d))
            p = c.acquire("l", lease=timedelta(seconds=30))
            c.close()           # the keeper stops; the lease stays
            c2 = semd.Client(addr(d))
            self.assertEqual(c2.check("l", p.token)["kind"], "lease")
            c2.revoke("l", p.token)
            c2.close()

    def test_expired_lease_is_noticed(self):
        """A lease nobody refreshes (its keeper stopped) ends; semd says
        so to a WATCH, and RELEASE says NotHeld, a PermitLost."""
        with start_semd("--semaphore", "l", "1") as d:
            c = semd.Client(addr(d))
            p = c.acquire("l", lease=0.3)
            c2 = semd.Client(addr(d))
            c._keeper_for().stop()
            c._keeper = None
            self.assertTrue(wait_until(lambda: used(c2, "l") == 0, BOUND),
                            "the lease ran out")
            with self.assertRaises(semd.PermitLost):
                p.release()
            self.assertTrue(p.lost.is_set())
            c.close()
            c2.close()


class Lost(unittest.TestCase):
    def _revoke_rounds(self, lease):
        figures = []
        with start_semd("--semaphore", "r", "1") as d:
            c = semd.Client(addr(d))
            op = connect(d.port)
            for _ in range(20):
                p = c.acquire("r", timeout=BOUND, lease=lease)
                # The keeper's WATCH is in place once semd lists it.
                self.assertTrue(wait_until(
                    lambda: any(x["cmd"].upper() == "WATCH" and
                                x["waiting"] == "1"
                                for x in op.listing("CLIENTS")), BOUND),
                    "the keeper WATCHes the permit")
                t0 = time.monotonic()
                self.assertEqual(op.cmd("REVOKE r %d" % p.token), "OK")
                self.assertTrue(p.lost.wait(BOUND), "lost is set")
                figures.append((time.monotonic() - t0) * 1000)
                self.assertEqual(p.lost_reason, "revoked")
                with self.assertRaises(semd.PermitLost):
                    p.raise_if_lost()
                with self.assertRaises(semd.NotHeld):
                    p.release()
            op.close()
            c.close()
        note("permit.lost after REVOKE (%s): median %.2f ms, max %.2f ms "
             "over %d rounds (issue 22 asks for 100 ms)" % (
                 "lease" if lease else "bound",
                 statistics.median(figures), max(figures), len(figures)))
        return figures

    def test_lost_on_revoke_bound(self):
        self._revoke_rounds(None)

    def test_lost_on_revoke_lease(self):
        self._revoke_rounds(10)


class Errors(unittest.TestCase):
    def test_typed_exceptions(self):
        with start_semd("--semaphore", "e", "2") as d:
            c = semd.Client(addr(d))
            with self.assertRaises(semd.NoSuchSemaphore):
                c.acquire("nosuch")
            with self.assertRaises(semd.TooLarge):
                c.acquire("e", 3)
            p = c.acquire("e", 2)
            t0 = time.monotonic()
            with self.assertRaises(semd.NotGranted):
                c.acquire("e", timeout=timedelta(milliseconds=200))
            self.assertGreaterEqual(time.monotonic() - t0, 0.19)
            self.assertIsNone(c.try_acquire("e"))
            p.release()
            q = c.try_acquire("e", 2)
            self.assertIsNotNone(q)
            q.release()
            with self.assertRaises(semd.NotHeld):
                c.check("e", q.token)
            with self.assertRaises(ValueError):
                c.acquire("bad name")
            with self.assertRaises(ValueError):
                c.acquire("e", timeout=-1)
            with self.assertRaises(TypeError):
                c.acquire("e", lease=True)
            with self.assertRaises(ValueError):
                c.acquire("e", 0)
            c.create("made", 4)
            with self.assertRaises(semd.AlreadyExists):
                c.create("made", 5)
            c.close()

    def test_cannot_connect(self):
        s = __import__("socket").socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()           # nothing listens there now
        c = semd.Client("127.0.0.1:%d" % port)
        with self.assertRaises(semd.ConnectFailed) as cm:
            c.acquire("x")
        self.assertIsInstance(cm.exception, semd.Unavailable)
        c.close()


class SwallowingSemd:
    """A fake semd on 127.0.0.1 that reads one request per connection
    and closes it unanswered, recording every line it got."""

    def __init__(self):
        import socket
        self.lines = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            data = b""
            s.settimeout(5)
            try:
                while b"\n" not in data:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            self.lines += data.decode().splitlines()
            s.close()

    def close(self):
        self.sock.close()


class LostReply(unittest.TestCase):
    def test_never_sent_again(self):
        """libsemc's rule: a request whose reply was lost is not sent
        again, to any address; an acquire says a permit may be lost."""
        a, b = SwallowingSemd(), SwallowingSemd()
        try:
            c = semd.Client([a.addr, b.addr], failover_timeout=2)
            with self.assertRaises(semd.AcquireLost) as cm:
                c.acquire("jobs", timeout=1)
            self.assertIsInstance(cm.exception, semd.PermitLost)
            with self.assertRaises(semd.ReplyLost):
                c.info("jobs")
            got = a.lines + b.lines
            self.assertEqual(got, ["ACQUIRE jobs 1 TIMEOUT 1000",
                                   "INFO jobs"], "each sent once")
            c.close()
        finally:
            a.close()
            b.close()


class Limited(unittest.TestCase):
    def test_decorator(self):
        with start_semd("--semaphore", "api", "1") as d:
            c = semd.Client(addr(d))
            seen = []
            lock = threading.Lock()
            state = {"now": 0, "max": 0}

            @c.limited("api", n=1, timeout=30, permit_arg="permit")
            def call(x, permit):
                with lock:
                    state["now"] += 1
                    state["max"] = max(state["max"], state["now"])
                seen.append(permit.token)
                time.sleep(0.002)
                with lock:
                    state["now"] -= 1
                if x < 0:
                    raise KeyError(x)
                return x * 2

            self.assertEqual(call.__name__, "call")
            ts = [threading.Thread(target=call, args=(i,))
                  for i in range(8)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(30)
            self.assertEqual(call(21), 42)
            with self.assertRaises(KeyError):
                call(-1)
            self.assertEqual(state["max"], 1)
            self.assertEqual(len(set(seen)), 10, "one token per call")
            self.assertEqual(used(c, "api"), 0)
            c.close()


class NameAndAuth(unittest.TestCase):
    def test_name_shown_in_holders(self):
        with start_semd("--semaphore", "n", "1") as d:
            c = semd.Client(addr(d), name="py-test@host:1")
            p = c.acquire("n")
            self.assertEqual(c.holders("n")[0]["name"], "py-test@host:1")
            p.release()
            c.close()
            with self.assertRaises(ValueError):
                semd.Client(addr(d), name="no spaces")

    def test_auth(self):
        with start_semd("--semaphore", "a", "1", "--requirepass",
                        "s3cret") as d:
            c = semd.Client([addr(d)], password="s3cret")
            with c.acquire("a") as p:
                self.assertGreater(p.token, 0)
            c.close()
            bad = semd.Client(addr(d), password="wrong")
            with self.assertRaises(semd.AuthError):
                bad.acquire("a")
            bad.close()
            none = semd.Client(addr(d))
            with self.assertRaises(semd.AuthError):
                none.acquire("a")
            none.close()


if __name__ == "__main__":
    pyunit.main(time_limit=240)
