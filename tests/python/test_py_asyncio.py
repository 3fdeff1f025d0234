#!/usr/bin/env python3
"""The asyncio client (semd.AsyncClient) against a real semd: async with,
FIFO across tasks, cancellation of a waiting acquire removing the waiter
(the next waiter is then served), permit.lost (an asyncio.Event) set on a
REVOKE (measured), a lease refreshed past its length, limited()."""

import asyncio
import statistics
import time
import unittest

import pyunit
import semd
from semdtest import note, start_semd

BOUND = 10.0


def addr(d):
    return "127.0.0.1:%d" % d.port


async def until(pred, timeout=BOUND):
    """Await pred() (a coroutine function) until true, within timeout."""
    deadline = time.monotonic() + timeout
    while True:
        if await pred():
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.02)


class AsyncCases(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.d = start_semd("--semaphore", "s", "2", "--semaphore",
                            "one", "1")
        self.c = semd.AsyncClient(addr(self.d), name="aio-test")

    async def asyncTearDown(self):
        await self.c.close()
        self.d.stop()

    async def used(self, sem):
        return int((await self.c.info(sem))["used"])

    async def test_async_with_and_exception(self):
        with self.assertRaises(RuntimeError):
            async with self.c.acquire("s", 2, timeout=5) as p:
                self.assertEqual(await self.used("s"), 2)
                raise RuntimeError("boom")
        self.assertTrue(p.released)
        self.assertEqual(await self.used("s"), 0)
        p2 = await self.c.acquire("s")
        self.assertGreater(p2.token, p.token)
        await p2.release()

    async def test_fifo_across_tasks(self):
        hold = await self.c.acquire("s", 2)
        order = []

        async def want(tag, n):
            p = await self.c.acquire("s", n, timeout=30)
            order.append((p.token, tag))
            return p

        big = asyncio.ensure_future(want("big", 2))
        self.assertTrue(await until(
            lambda: self._nwaiters("s", 1)))
        small = asyncio.ensure_future(want("small", 1))
        self.assertTrue(await until(lambda: self._nwaiters("s", 2)))
        await hold.release()
        pb = await asyncio.wait_for(big, BOUND)
        self.assertFalse(small.done(), "the small one waits for room")
        await pb.release()
        ps = await asyncio.wait_for(small, BOUND)
        await ps.release()
        self.assertEqual([t for _, t in sorted(order)], ["big", "small"])

    async def _nwaiters(self, sem, n):
        return len(await self.c.waiters(sem)) == n

    async def test_cancel_removes_the_waiter(self):
        hold = await self.c.acquire("one")
        first = asyncio.ensure_future(self.c.acquire("one"))
        self.assertTrue(await until(lambda: self._nwaiters("one", 1)))
        second = asyncio.ensure_future(self.c.acquire("one", timeout=30))
        self.assertTrue(await until(lambda: self._nwaiters("one", 2)))
        first.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await first
        t0 = time.monotonic()
        self.assertTrue(await until(lambda: self._nwaiters("one", 1)),
                        "the cancelled waiter left semd's queue")
        note("cancelled waiter gone from WAITERS after %.1f ms"
             % ((time.monotonic() - t0) * 1000))
        await hold.release()
        p = await asyncio.wait_for(second, BOUND)
        self.assertEqual(await self.used("one"), 1,
                         "the waiter behind the cancelled one got it")
        await p.release()
        self.assertEqual(await self.used("one"), 0)

    async def test_lost_on_revoke(self):
        figures = []
        for lease in (None, 30) * 5:
            p = await self.c.acquire("one", timeout=BOUND, lease=lease)
            self.assertTrue(await until(self._watching))
            t0 = time.monotonic()
            await self.c.revoke("one", p.token)
            await asyncio.wait_for(p.lost.wait(), BOUND)
            figures.append((time.monotonic() - t0) * 1000)
            self.assertEqual(p.lost_reason, "revoked")
            with self.assertRaises(semd.PermitLost):
                await p.release()
        note("asyncio permit.lost after REVOKE: median %.2f ms, max %.2f "
             "ms over %d rounds" % (statistics.median(figures),
                                    max(figures), len(figures)))

    async def _watching(self):
        r = await self.c._plain("CLIENTS", True)
        return any(x.get("cmd", "").upper() == "WATCH" and
                   x.get("waiting") == "1" for x in r.lines)

    async def test_lease_refreshed_past_its_length(self):
        p = await self.c.acquire("one", lease=1.5)
        deadline = time.monotonic() + 4.5
        while time.monotonic() < deadline:
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(p.lost.wait(), 0.2)
        self.assertEqual((await self.c.check("one", p.token))["kind"],
                         "lease")
        await p.release()
        self.assertEqual(await self.used("one"), 0)

    async def test_limited_and_errors(self):
        now = {"n": 0, "max": 0}

        @self.c.limited("one", timeout=30, permit_arg="permit")
        async def job(i, permit):
            now["n"] += 1
            now["max"] = max(now["max"], now["n"])
            await asyncio.sleep(0.005)
            now["n"] -= 1
            return permit.token

        tokens = await asyncio.gather(*(job(i) for i in range(10)))
        self.assertEqual(len(set(tokens)), 10)
        self.assertEqual(now["max"], 1)
        with self.assertRaises(semd.NoSuchSemaphore):
            await self.c.acquire("nosuch")
        with self.assertRaises(semd.TooLarge):
            await self.c.acquire("one", 2)
        p = await self.c.acquire("one")
        with self.assertRaises(semd.NotGranted):
            await self.c.acquire("one", timeout=0.1)
        self.assertIsNone(await self.c.try_acquire("one"))
        await p.release()


if __name__ == "__main__":
    pyunit.main(time_limit=180)
