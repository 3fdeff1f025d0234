#!/usr/bin/env python3
"""The Python client across a kill -9 and restart of a persistent semd
(private redis-server), and across a failover from an owner to its
standby: the bound permit is re-ATTACHed by the client's keeper with no
call from the holder (HOLDERS shows it owned again, permit.lost stays
clear), a lease stays held and refreshed, a client given the standby's
address first follows ERR STANDBY owner= to the owner. A leased
acquire_all whose reply was lost just before a kill -9 is sent again
after the restart with its id and learns the same token."""

import time
import unittest

import pyunit
import semd
from redistest import (require_redis, role_of, start_redis,
                       start_semd_redis, wait_role)
from semdtest import note, wait_until
from test_py_ids import LossyProxy

BOUND = 20.0
GRACE = "10s"           # reclaim-grace: the default


def owned(c, sem, token):
    """The HOLDERS row of token (raw harness connection), or None."""
    for h in c.listing("HOLDERS %s" % sem):
        if h["token"] == str(token):
            return h
    return None


def attached(p, sem, token):
    """True once the semd of p lists token as bound to a connection."""
    def pred():
        try:
            c = p.connect(timeout=2.0)
            h = owned(c, sem, token)
            c.close()
            return h is not None and h["owner"] != "-"
        except Exception:
            return False
    return pred


class Persistent(unittest.TestCase):
    def setUp(self):
        try:
            require_redis()
        except RuntimeError as e:
            self.fail(str(e))

    def test_lost_reply_across_restart(self):
        with start_redis() as r:
            p = start_semd_redis(r, "--semaphore", "gpu", "1",
                                 "--semaphore", "db", "2", "--owner-lease",
                                 "1s", grace=GRACE)
            # The reply is read by the proxy (sync mode: Redis has the
            # grant), semd is killed and restarted, then the client's
            # connection closes: it asks again after the restart.
            proxy = LossyProxy(p.port, on_lose=p.restart)
            c = semd.Client(proxy.addr, failover_timeout=BOUND)
            try:
                job = c.acquire_all({"gpu": 1, "db": 2}, timeout=BOUND,
                                    lease=30)
                self.assertEqual(proxy.lost, 1)
                self.assertEqual(p.restarts, 1)
                sent = [x for x in proxy.lines
                        if x.startswith("ACQUIREALL")]
                self.assertGreaterEqual(len(sent), 2, sent)
                self.assertEqual(len({x.split(" ID ")[1] for x in sent}),
                                 1, "one id throughout")
                other = semd.Client("127.0.0.1:%d" % p.port)
                for sem in ("gpu", "db"):
                    rows = other.holders(sem)
                    self.assertEqual([h["token"] for h in rows],
                                     [str(job.token)], sem)
                job.release()
                self.assertEqual(other.info("db")["used"], "0")
                other.close()
            finally:
                c.close()
                proxy.close()

    def test_kill9_restart_reattaches(self):
        with start_redis() as r:
            # owner-lease 1s: the restarted semd waits that long for the
            # killed one's claim to expire; the lease outlasts it.
            p = start_semd_redis(r, "--semaphore", "s", "1",
                                 "--semaphore", "l", "1", "--owner-lease",
                                 "1s", grace=GRACE)
            c = semd.Client("127.0.0.1:%d" % p.port, name="py-restart")
            bound = c.acquire("s", timeout=5)
            lease = c.acquire("l", timeout=5, lease=4)
            acquired = time.monotonic()
            self.assertTrue(wait_until(attached(p, "s", bound.token), 5))
            p.restart()                 # kill -9, start on the same port
            t0 = time.monotonic()
            self.assertTrue(wait_until(attached(p, "s", bound.token),
                                       BOUND),
                            "the keeper re-ATTACHed the bound permit")
            note("bound permit re-attached %.0f ms after the restart was "
                 "ready" % ((time.monotonic() - t0) * 1000))
            self.assertFalse(bound.lost.is_set(), bound.lost_reason)
            other = semd.Client("127.0.0.1:%d" % p.port)
            self.assertIsNone(other.try_acquire("s"), "still held")
            # The lease goes on being refreshed past twice its length.
            deadline = acquired + 9
            while time.monotonic() < deadline:
                self.assertFalse(lease.lost.wait(0.2), lease.lost_reason)
            self.assertEqual(other.check("l", lease.token)["kind"], "lease")
            bound.release()
            lease.release()
            self.assertEqual(other.info("s")["used"], "0")
            self.assertEqual(other.info("l")["used"], "0")
            other.close()
            c.close()

    def test_unavailable_while_redis_stopped(self):
        """ERR UNAVAILABLE is semd.Unavailable: nothing was granted."""
        with start_redis() as r:
            p = start_semd_redis(r, "--semaphore", "s", "1", grace=GRACE)
            c = semd.Client("127.0.0.1:%d" % p.port)
            r.pause()                   # SIGSTOP: semd's writes time out
            try:
                with self.assertRaises(semd.Unavailable) as cm:
                    c.acquire("s", timeout=5)
                self.assertEqual(cm.exception.code, "UNAVAILABLE")
                self.assertNotIsInstance(cm.exception, semd.ConnectFailed)
            finally:
                r.resume()
            self.assertEqual(c.info("s")["used"], "0", "nothing granted")
            got = None
            deadline = time.monotonic() + BOUND
            while got is None and time.monotonic() < deadline:
                try:
                    got = c.acquire("s", timeout=5)
                except semd.Unavailable:
                    time.sleep(0.1)     # semd reconnects with backoff
            self.assertIsNotNone(got, "granted once Redis is back")
            got.release()
            c.close()

    def test_failover_followed(self):
        with start_redis() as r:
            args = ("--semaphore", "jobs", "3", "--owner-lease", "1s")
            a = start_semd_redis(r, *args, grace=GRACE)
            b = start_semd_redis(r, *(args + ("--standby", "yes")),
                                 grace=GRACE)
            self.assertEqual(role_of(b.connect())["role"], "standby")
            ha, hb = "127.0.0.1:%d" % a.port, "127.0.0.1:%d" % b.port
            # The standby first: the client follows ERR STANDBY owner=.
            c = semd.Client([hb, ha], name="py-failover")
            bound = c.acquire("jobs", timeout=5)
            lease = c.acquire("jobs", timeout=5, lease=3)
            self.assertTrue(wait_until(attached(a, "jobs", bound.token),
                                       5), "granted by the owner")
            a.kill9()
            t0 = time.monotonic()
            role, _ = wait_role(b.port, "owner", BOUND)
            self.assertEqual(role and role["role"], "owner")
            self.assertTrue(wait_until(attached(b, "jobs", bound.token),
                                       BOUND),
                            "the bound permit is bound again on the new "
                            "owner")
            note("bound permit re-attached on the new owner %.0f ms after "
                 "the kill" % ((time.monotonic() - t0) * 1000))
            self.assertFalse(bound.lost.is_set(), bound.lost_reason)
            self.assertFalse(lease.lost.is_set(), lease.lost_reason)
            self.assertEqual(c.check("jobs", lease.token)["kind"], "lease")
            third = c.acquire("jobs", timeout=5)
            self.assertGreater(third.token, lease.token,
                               "tokens continue on the new owner")
            self.assertIsNone(c.try_acquire("jobs"), "3 of 3 are held")
            for p in (bound, lease, third):
                p.release()
            self.assertEqual(c.info("jobs")["used"], "0")
            c.close()

    def test_async_failover_followed(self):
        import asyncio
        with start_redis() as r:
            args = ("--semaphore", "jobs", "2", "--owner-lease", "1s")
            a = start_semd_redis(r, *args, grace=GRACE)
            b = start_semd_redis(r, *(args + ("--standby", "yes")),
                                 grace=GRACE)
            hosts = "127.0.0.1:%d,127.0.0.1:%d" % (a.port, b.port)

            async def main():
                c = semd.AsyncClient(hosts)
                bound = await c.acquire("jobs", timeout=5)
                a.kill9()
                ok = await asyncio.get_running_loop().run_in_executor(
                    None, wait_until, attached(b, "jobs", bound.token),
                    BOUND)
                self.assertTrue(ok, "re-attached on the new owner")
                self.assertFalse(bound.lost.is_set(), bound.lost_reason)
                await bound.release()
                self.assertEqual((await c.info("jobs"))["used"], "0")
                await c.close()
            asyncio.run(main())


if __name__ == "__main__":
    pyunit.main(time_limit=240)
