#!/usr/bin/env python3
"""acquire_all and request ids in the Python client, sync and asyncio,
against a real semd: both or neither; the same id answers the same token
with one grant in HOLDERS, another n is AlreadyExists; a leased acquire
whose reply a proxy lost is sent again with the same drawn id and gets
the same token; threads (and tasks) that name a and b in opposite orders
never deadlock nor over-grant. Against a scripted fake: a semd 1.0 that
refuses ID gets no drawn id, and a reply lost for good ends in
AcquireLost after the retries of failover_timeout."""

import asyncio
import re
import socket
import threading
import time
import unittest

import pyunit
import semd
from semdtest import start_semd, wait_until

BOUND = 10.0
DRAWN_ID = re.compile(r" ID [0-9a-f]{32}$")


def addr(d):
    return "127.0.0.1:%d" % d.port


class LossyProxy:
    """Relays to semd, but loses the reply to the first `drops` requests
    that carry an ID: the request reaches semd, its reply is read and
    both connections are closed, as a network failure after sending."""

    def __init__(self, port, drops=1, on_lose=None):
        self.port = port
        self.drops = drops
        self.on_lose = on_lose      # called before the client's close
        self.lost = 0
        self.lines = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                cl, _ = self.sock.accept()
            except OSError:
                return
            up = socket.create_connection(("127.0.0.1", self.port))
            state = {"dropping": False}
            threading.Thread(target=self._down, args=(cl, up, state),
                             daemon=True).start()
            threading.Thread(target=self._up, args=(cl, up, state),
                             daemon=True).start()

    def _up(self, cl, up, state):
        f = cl.makefile("rb")
        try:
            for raw in f:
                line = raw.decode().strip()
                with self.lock:
                    self.lines.append(line)
                    if " ID " in line and self.drops > 0:
                        self.drops -= 1
                        state["dropping"] = True
                up.sendall(raw)
        except OSError:
            pass
        up.close()

    def _down(self, cl, up, state):
        f = up.makefile("rb")
        try:
            for raw in f:
                if state["dropping"]:
                    with self.lock:
                        self.lost += 1
                    if self.on_lose is not None:
                        self.on_lose()
                    break
                cl.sendall(raw)
        except OSError:
            pass
        for s in (cl, up):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def acquires(self):
        with self.lock:
            return [line for line in self.lines
                    if line.startswith("ACQUIRE")]

    def close(self):
        self.sock.close()


class FakeSemd:
    """A scripted semd 1.0 on 127.0.0.1: ERR PROTO to any ID, OK 7 to
    acquires, closes unanswered an acquire of "gone"."""

    def __init__(self):
        self.lines = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(s,),
                             daemon=True).start()

    def _serve(self, s):
        with s:
            for raw in s.makefile("rb"):
                line = raw.decode().strip()
                self.lines.append(line)
                if line.startswith("ACQUIRE gone "):
                    return
                if line.startswith("WATCH "):
                    continue        # no reply: a WATCH that waits
                if " ID " in line:
                    reply = "ERR PROTO unknown option ID"
                elif line.startswith(("ACQUIRE", "TRY")):
                    reply = "OK 7"
                else:
                    reply = "OK"
                s.sendall((reply + "\r\n").encode())

    def close(self):
        self.sock.close()


class Sync(unittest.TestCase):
    def setUp(self):
        self.d = start_semd("--semaphore", "a", "1", "--semaphore", "b",
                            "2", "--semaphore", "db", "5")
        self.c = semd.Client(addr(self.d))

    def tearDown(self):
        self.c.close()
        self.d.stop()

    def used(self, sem):
        return int(self.c.info(sem)["used"])

    def test_both_or_neither(self):
        held = self.c.acquire("a", lease=30)
        with self.assertRaises(semd.NotGranted):
            self.c.acquire_all({"a": 1, "b": 2}, timeout=0, lease=30)
        with self.assertRaises(semd.NotGranted):
            self.c.acquire_all([("b", 1), ("a", 1)], timeout=0.2)
        self.assertEqual(self.used("b"), 0, "nothing of b while a waits")
        held.release()
        p = self.c.acquire_all({"a": 1, "b": 2}, lease=30)
        self.assertEqual(p.parts, {"a": 1, "b": 2})
        for sem in ("a", "b"):
            rows = self.c.holders(sem)
            self.assertEqual(len(rows), 1, sem)
            self.assertEqual(rows[0]["token"], str(p.token))
            self.assertEqual(rows[0]["multi"], "2")
        p.release()
        self.assertEqual((self.used("a"), self.used("b")), (0, 0))
        with self.c.acquire_all({"a": 1, "b": 1}) as bound:  # no lease
            self.assertTrue(bound.bound)
            self.assertEqual(self.used("b"), 1)
        self.assertEqual(self.used("b"), 0)
        for bad in ({"a": 1}, [("a", 1), ("a", 1)], {"a": 1, "b c": 1},
                    {"a": 0, "b": 1}):
            with self.assertRaises(ValueError):
                self.c.acquire_all(bad, lease=1)
        with self.assertRaises(semd.TooLarge):
            self.c.acquire_all({"a": 2, "b": 1}, lease=1)

    def test_same_id_same_token(self):
        other = semd.Client(addr(self.d))
        try:
            p1 = self.c.acquire("db", 2, lease=30, id="job-17")
            p2 = other.acquire("db", 2, lease=30, id="job-17")
            p3 = self.c.try_acquire("db", 2, lease=30, id="job-17")
            self.assertEqual({p1.token, p2.token, p3.token}, {p1.token})
            self.assertEqual(len(self.c.holders("db")), 1)
            self.assertEqual(self.used("db"), 2)
            with self.assertRaises(semd.AlreadyExists):
                self.c.acquire("db", 3, lease=1, id="job-17")
            with self.assertRaises(ValueError):
                self.c.acquire("db", 1, id="bound-has-none")
            for bad in ("a b", "x" * 65, ""):
                with self.assertRaises(ValueError):
                    self.c.acquire("db", 1, lease=1, id=bad)
            p1.release()
            self.assertEqual(self.used("db"), 0)
            q1 = self.c.acquire_all({"a": 1, "db": 2}, lease=30,
                                    id="train-1")
            q2 = other.acquire_all([("db", 2), ("a", 1)], lease=30,
                                   id="train-1")
            self.assertEqual(q1.token, q2.token)
            with self.assertRaises(semd.AlreadyExists):
                self.c.acquire_all({"a": 1, "db": 1}, lease=1,
                                   id="train-1")
            q1.release()
        finally:
            other.close()

    def test_lost_reply_retried(self):
        for multi in (False, True):
            proxy = LossyProxy(self.d.port)
            c = semd.Client(proxy.addr)
            try:
                if multi:
                    p = c.acquire_all({"a": 1, "b": 1}, timeout=30,
                                      lease=30)
                else:
                    p = c.acquire("a", lease=30)
                self.assertEqual(proxy.lost, 1)
                sent = proxy.acquires()
                self.assertEqual(len(sent), 2, sent)
                self.assertRegex(sent[0], DRAWN_ID)
                # The same id; the TIMEOUT cut to what was left of it.
                self.assertEqual(sent[0].split(" ID ")[1],
                                 sent[1].split(" ID ")[1])
                if multi:
                    waits = [int(x.split(" TIMEOUT ")[1].split()[0])
                             for x in sent]
                    self.assertEqual(waits[0], 30000)
                    self.assertLessEqual(waits[1], 30000)
                rows = self.c.holders("a")
                self.assertEqual([r["token"] for r in rows], [str(p.token)])
                p.release()
                self.assertEqual((self.used("a"), self.used("b")), (0, 0))
            finally:
                c.close()
                proxy.close()

    def test_opposite_orders_never_deadlock(self):
        state = {"inside": 0, "max": 0, "rounds": 0}
        lock = threading.Lock()
        errors = []

        def worker(order):
            try:
                for _ in range(30):
                    with self.c.acquire_all(order, timeout=60, lease=30):
                        with lock:
                            state["inside"] += 1
                            state["max"] = max(state["max"],
                                               state["inside"])
                        with lock:
                            state["inside"] -= 1
                            state["rounds"] += 1
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(o,)) for o in
                   ([("a", 1), ("b", 1)], [("b", 1), ("a", 1)])]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertFalse(any(t.is_alive() for t in threads), "deadlock")
        self.assertEqual(errors, [])
        self.assertEqual(state["rounds"], 60)
        self.assertEqual(state["max"], 1, "a (capacity 1) held twice")


class OldSemd(unittest.TestCase):
    def test_drawn_id_dropped_for_semd_1_0(self):
        fake = FakeSemd()
        try:
            c = semd.Client(fake.addr, failover_timeout=0.7)
            for _ in range(2):
                p = c.acquire("old", lease=10)
                self.assertEqual(p.token, 7)
                p.release()
            with_id = [x for x in fake.lines
                       if x.startswith("ACQUIRE old") and " ID " in x]
            self.assertEqual(len(with_id), 1, fake.lines)
            with self.assertRaises(semd.ProtocolError):
                c.acquire("old", lease=1, id="mine")
            c.close()
            c2 = semd.Client(fake.addr, failover_timeout=0.7)
            with self.assertRaises(semd.AcquireLost):
                c2.acquire("gone", lease=10)
            sent = [x for x in fake.lines if x.startswith("ACQUIRE gone")]
            self.assertGreaterEqual(len(sent), 3, "sent again with its id")
            self.assertEqual(len(set(sent)), 1, sent)
            c2.close()
        finally:
            fake.close()


class Async(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.d = start_semd("--semaphore", "a", "1", "--semaphore", "b",
                            "2")
        self.c = semd.AsyncClient(addr(self.d))

    async def asyncTearDown(self):
        await self.c.close()
        self.d.stop()

    async def used(self, sem):
        return int((await self.c.info(sem))["used"])

    async def test_both_or_neither_and_ids(self):
        held = await self.c.acquire("a", lease=30)
        with self.assertRaises(semd.NotGranted):
            await self.c.acquire_all({"a": 1, "b": 2}, timeout=0, lease=30)
        self.assertEqual(await self.used("b"), 0)
        await held.release()
        async with self.c.acquire_all({"a": 1, "b": 2}, lease=30,
                                      id="aio-1") as p:
            again = await self.c.acquire_all({"b": 2, "a": 1}, lease=30,
                                             id="aio-1")
            self.assertEqual(again.token, p.token)
            self.assertEqual(len(await self.c.holders("b")), 1)
            self.assertEqual((await self.c.holders("a"))[0]["multi"], "2")
            with self.assertRaises(semd.AlreadyExists):
                await self.c.acquire_all({"a": 1, "b": 1}, lease=30,
                                         id="aio-1")
            t = await self.c.try_acquire("a", lease=30, id="x")
            self.assertIsNone(t)
        self.assertEqual(await self.used("a"), 0)

    async def test_lost_reply_retried(self):
        proxy = LossyProxy(self.d.port)
        c = semd.AsyncClient(proxy.addr)
        try:
            p = await c.acquire("b", 2, lease=30)
            self.assertEqual(proxy.lost, 1)
            sent = proxy.acquires()
            self.assertEqual(len(sent), 2)
            self.assertEqual(sent[0], sent[1])
            self.assertRegex(sent[0], DRAWN_ID)
            rows = await self.c.holders("b")
            self.assertEqual([r["token"] for r in rows], [str(p.token)])
            await p.release()
        finally:
            await c.close()
            proxy.close()

    async def test_opposite_orders_never_deadlock(self):
        inside = {"now": 0, "max": 0}

        async def worker(order):
            for _ in range(30):
                async with self.c.acquire_all(order, timeout=60, lease=30):
                    inside["now"] += 1
                    inside["max"] = max(inside["max"], inside["now"])
                    await asyncio.sleep(0)
                    inside["now"] -= 1

        await asyncio.wait_for(asyncio.gather(
            worker([("a", 1), ("b", 1)]), worker([("b", 1), ("a", 1)])),
            120)
        self.assertEqual(inside["max"], 1)


if __name__ == "__main__":
    pyunit.main(time_limit=240)
