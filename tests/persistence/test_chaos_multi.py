#!/usr/bin/env python3
"""Chaos with ACQUIREALL: 20 s of 12 client threads mixing single
ACQUIREs and ACQUIREALLs of two or three semaphores in random order
(bound and leased, some with an ID retried once after a lost reply), on
semaphores of capacity 1 to 4, while semd (sync persistence) is kill -9ed
every 2-5 s and restarted on the same port.

Checked from the clients' own observations (tests/chaosmodel.py): a
multi-grant is believed held on each of its semaphores with that one's
n, from its `OK <token>` until its RELEASE is sent, its connection is
seen lost (unless ATTACHed back through one of them) or its lease ends
by the client's clock from when it SENT the request; then
(a) at no instant do the beliefs of one semaphore sum above its capacity;
(b) no token is acknowledged twice (a retry by ID is the same grant:
    counted once);
(c) semd stayed up between kills and the run made progress, multi-grants
    included;
(d) semd's own INFO never shows used above capacity.
Set CHAOS_SECONDS / CHAOS_SEED to vary the run."""
import os
import random
import re
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403
from chaosmodel import (Monitor, ChaosClient, check_capacity,  # noqa: E402
                        check_tokens_unique, kill_and_restart,
                        finish_run, check_threads)

SEMS = {"m1": 1, "m2": 2, "m3": 4}
CLIENTS = 12
SECONDS = float(os.environ.get("CHAOS_SECONDS", "20"))
SEED = int(os.environ.get("CHAOS_SEED", str(int(time.time()))))
GRACE = "3s"
INF = float("inf")

now = time.monotonic


class World:
    def __init__(self, port, end):
        self.port = port
        self.end = end
        self.stop = False


class Client(ChaosClient):
    def __init__(self, idx, world):
        super().__init__(name="client%d" % idx, daemon=True)
        self.idx = idx
        self.w = world
        self.rng = random.Random(SEED * 1000 + idx)
        self.conn = None
        self.beliefs = []   # (sem, n, start, end, token, kind)
        self.acked = []     # (token, None, sems)
        self.counts = {}
        self.error = None
        self.ids = 0

    def count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    def connect(self):
        while now() < self.w.end + 10 and not self.w.stop:
            try:
                self.conn = connect(self.w.port, timeout=2)
            except OSError:
                time.sleep(0.05)
                continue
            self.count("connects")
            return True
        return False

    def drop(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def req(self, line, timeout):
        t_sent = now()
        try:
            self.conn.send(line + "\r\n")
            rep = self.conn.line(timeout)
        except (OSError, ConnClosed, ReplyTimeout):
            self.drop()
            return None, t_sent, now()
        return rep, t_sent, now()

    def request(self):
        """A random request: (parts [(sem, n)], lease_ms or None, id or
        None, line)."""
        k = self.rng.choice((1, 2, 2, 3))
        sems = self.rng.sample(sorted(SEMS), k)
        parts = [(s, 1 if self.rng.random() < 0.8 else
                  self.rng.randint(1, SEMS[s])) for s in sems]
        lease_ms = self.rng.randint(300, 1500) if self.rng.random() < 0.5 \
            else None
        rid = None
        if lease_ms is not None and self.rng.random() < 0.5:
            self.ids += 1
            rid = "c%d-%d" % (self.idx, self.ids)
        if k == 1:
            line = "ACQUIRE %s %d" % parts[0]
        else:
            line = "ACQUIREALL " + " ".join("%s %d" % p for p in parts)
        line += " TIMEOUT %d" % self.rng.randint(50, 2000)
        if lease_ms is not None:
            line += " LEASE %d" % lease_ms
        if rid is not None:
            line += " ID " + rid
        return parts, lease_ms, rid, line

    def loop(self):
        for _ in self.turns():
            parts, lease_ms, rid, line = self.request()
            rep, t_sent, t_rep = self.req(line, 10)
            if rep is None and rid is not None and self.connect():
                # The reply was lost: ask again with the same ID. The
                # belief starts from the retry's answer, but the lease
                # counts from the first send (it may have been granted
                # then).
                self.count("retries")
                rep, _, t_rep = self.req(line, 10)
            if rep is None:
                self.count("acquire_lost")
                continue
            m = re.fullmatch(r"OK ([0-9]+)", rep)
            if not m:
                self.count(rep.split()[0] if rep.startswith("TIMEOUT")
                           else " ".join(rep.split()[:2]))
                if rep.startswith("ERR"):
                    time.sleep(0.05)
                continue
            tok = int(m.group(1))
            self.count("grants" if len(parts) == 1 else "multi grants")
            self.acked.append((tok, None, tuple(s for s, _ in parts)))
            lease_end = t_sent + lease_ms / 1000.0 if lease_ms is not None \
                else INF
            self.hold(parts, tok, t_rep, lease_end,
                      "lease" if lease_ms is not None else "conn")

    def believe(self, parts, start, end, tok, kind):
        if end > start:
            for sem, n in parts:
                self.beliefs.append((sem, n, start, end, tok, kind))

    def hold(self, parts, tok, start, lease_end, kind):
        time.sleep(self.rng.uniform(0.02, 0.3))
        for _ in range(20):
            if now() >= lease_end:
                self.believe(parts, start, lease_end, tok, kind)
                return
            via = self.rng.choice(parts)[0]
            rep, t_sent, _ = self.req("RELEASE %s %d" % (via, tok), 5)
            self.believe(parts, start, min(t_sent, lease_end), tok, kind)
            if rep is not None:
                self.count("release " + " ".join(rep.split()[:2]))
                return
            if kind == "lease" or not self.connect():
                return
            via = self.rng.choice(parts)[0]
            rep, _, t_rep = self.req("ATTACH %s %d" % (via, tok), 5)
            if rep != "OK":
                self.count("attach " + (" ".join(rep.split()[:2])
                                        if rep else "lost"))
                return
            self.count("attach OK")
            start = t_rep


def test_chaos_multi():
    note("seed %d, %.0f s, %d clients" % (SEED, SECONDS, CLIENTS))
    args = []
    for name, cap in sorted(SEMS.items()):
        args += ["--semaphore", name, str(cap)]
    with start_redis() as r:
        p = start_semd_redis(r, *args, grace=GRACE)
        t0 = now()
        w = World(p.port, t0 + SECONDS)
        clients = [Client(i, w) for i in range(CLIENTS)]
        mon = Monitor([w.port], sorted(SEMS),
                      lambda: now() >= w.end or w.stop)
        for th in clients + [mon]:
            th.start()
        rng = random.Random(SEED)
        try:
            kills, up_ok = kill_and_restart(p, w, rng)
        finally:
            finish_run(w, clients + [mon])
        check_threads(clients + [mon])
        ok(up_ok and p.d.alive(), "(c) semd was up before every kill and at "
           "the end", log_tail(p.log_text()))
        counts = {}
        for cl in clients:
            for k, v in cl.counts.items():
                counts[k] = counts.get(k, 0) + v
        note("kills/restarts %d; %s" % (kills, ", ".join(
            "%s=%d" % kv for kv in sorted(counts.items()))))
        ok(kills >= max(1, int(SECONDS / 8)),
           "(c) semd was killed and restarted %d times" % kills)
        # m1 (capacity 1) is in most requests and heads the others'
        # queues: the run is about safety, throughput stays low.
        ok(counts.get("grants", 0) >= 5 and
           counts.get("multi grants", 0) >= 5,
           "(c) real progress: %d single and %d multi grants" %
           (counts.get("grants", 0), counts.get("multi grants", 0)))
        for sem, cap in sorted(SEMS.items()):
            check_capacity(sem, cap, [b for cl in clients
                                      for b in cl.beliefs if b[0] == sem], t0)
        check_tokens_unique([a for cl in clients for a in cl.acked])
        ok(not mon.over, "(d) semd's INFO never showed used > capacity",
           repr(mon.over[:5]))
        p.stop()


run(test_chaos_multi, time_limit=int(SECONDS) + 120)
