#!/usr/bin/env python3
"""Chaos: 30 s of 20 client threads acquiring, holding and releasing
permits (bound and leased, n 1..2, with TIMEOUT) on small semaphores,
reconnecting and ATTACHing their bound permits back, while semd (sync
persistence) is kill -9ed every 2-5 s and restarted on the same port.

Checked afterwards from the clients' own observations, on this process's
one monotonic clock:
(a) at no instant do the grants the clients believe held sum above a
    semaphore's capacity. A client believes a grant held from receiving
    `OK <token>` until it sends RELEASE, sees its connection drop (unless
    a later ATTACH succeeds: then from the ATTACH reply on), or its lease
    ends by its own clock counted from when it SENT the ACQUIRE;
(b) no token is acknowledged twice, and a semd acknowledges only tokens
    above every token acknowledged by the semds before it;
(c) semd stayed up between kills and the run made progress;
(d) semd's own INFO never shows used above capacity;
(e) no RELEASE of a grant its client still held got ERR NOTHELD.
Set CHAOS_SECONDS / CHAOS_SEED to vary the run."""
import os
import random
import re
import sys
import threading
import time
import traceback

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403
from chaosmodel import (Monitor, overbooked, random_acquire,  # noqa: E402
                        chaos_acquire, ChaosClient,
                        check_capacity, check_tokens_unique,
                        kill_and_restart, finish_run, check_threads)

SEMS = {"c3": 3, "c2": 2}
CLIENTS = 20
SECONDS = float(os.environ.get("CHAOS_SECONDS", "30"))
SEED = int(os.environ.get("CHAOS_SEED", str(int(time.time()))))
GRACE = "3s"
INF = float("inf")

now = time.monotonic


class World:
    """What the clients share: the port and the semd generation."""

    def __init__(self, port, end):
        self.port = port
        self.end = end
        self.gen = 0            # bumped after a kill, before the restart
        self.stop = False


class Client(ChaosClient):
    def __init__(self, idx, world):
        super().__init__(name="client%d" % idx, daemon=True)
        self.idx = idx
        self.w = world
        self.rng = random.Random(SEED * 1000 + idx)
        self.conn = None
        self.gen = None
        self.beliefs = []   # (sem, n, start, end, token, kind)
        self.acked = []     # (token, gen or None, sem)
        self.counts = {}
        self.bad_notheld = []
        self.error = None

    def count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    def connect(self):
        """Connect (retrying while semd restarts); False when time is up.
        .gen is the semd generation if it is known for sure."""
        while now() < self.w.end + 10 and not self.w.stop:
            g0 = self.w.gen
            try:
                c = connect(self.w.port, timeout=2)
            except OSError:
                time.sleep(0.05)
                continue
            g1 = self.w.gen
            self.conn = c
            self.gen = g0 if g0 == g1 else None
            self.count("connects")
            return True
        return False

    def drop(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def req(self, line, timeout):
        """(reply or None if the connection was lost, t_sent, t_reply)."""
        t_sent = now()
        try:
            self.conn.send(line + "\r\n")
            rep = self.conn.line(timeout)
        except (OSError, ConnClosed, ReplyTimeout):
            self.drop()
            return None, t_sent, now()
        return rep, t_sent, now()

    def loop(self):
        for _ in self.turns():
            sem, n, lease_ms, line = random_acquire(self.rng, SEMS)
            gen = self.gen
            got = chaos_acquire(self, line, "acquire_lost")
            if got is None:
                continue
            tok, t_sent, t_rep = got
            self.acked.append((tok, gen, sem))
            lease_end = t_sent + lease_ms / 1000.0 if lease_ms is not None \
                else INF
            self.hold(sem, n, tok, t_rep, lease_end,
                      "lease" if lease_ms is not None else "conn")

    def believe(self, sem, n, start, end, tok, kind):
        if end > start:
            self.beliefs.append((sem, n, start, end, tok, kind))

    def hold(self, sem, n, tok, start, lease_end, kind):
        time.sleep(self.rng.uniform(0.02, 0.4))
        for _ in range(20):
            t = now()
            if t >= lease_end:
                self.believe(sem, n, start, lease_end, tok, kind)
                self.count("lease_ran_out")
                return
            rep, t_sent, _ = self.req("RELEASE %s %d" % (sem, tok), 5)
            self.believe(sem, n, start, min(t_sent, lease_end), tok, kind)
            if rep is not None:
                self.count("release " + " ".join(rep.split()[:2]))
                if rep.startswith("ERR NOTHELD") and \
                        t_sent < lease_end - 0.1:
                    self.bad_notheld.append((sem, tok, kind, rep))
                return
            # the connection dropped: a lease outlives it, a bound permit
            # must be ATTACHed back from the new connection
            if kind == "lease" or not self.connect():
                return
            rep, _, t_rep = self.req("ATTACH %s %d" % (sem, tok), 5)
            if rep != "OK":
                self.count("attach " + (" ".join(rep.split()[:2])
                                        if rep else "lost"))
                return
            self.count("attach OK")
            start = t_rep


def test_chaos():
    note("seed %d, %.0f s, %d clients" % (SEED, SECONDS, CLIENTS))
    args = []
    for name, cap in sorted(SEMS.items()):
        args += ["--semaphore", name, str(cap)]
    with start_redis() as r:
        # The deepest pipeline: every failure fails the most batches.
        p = start_semd_redis(r, "--persistence-pipeline", "64", *args,
                             grace=GRACE)
        t0 = now()
        w = World(p.port, t0 + SECONDS)
        clients = [Client(i, w) for i in range(CLIENTS)]
        mon = Monitor([w.port], sorted(SEMS),
                      lambda: now() >= w.end or w.stop)
        for th in clients + [mon]:
            th.start()
        rng = random.Random(SEED)

        def new_generation():
            w.gen += 1

        try:
            kills, up_ok = kill_and_restart(p, w, rng, new_generation)
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
        note("monitor polls %d" % mon.polls)
        ok(kills >= max(1, int(SECONDS / 8)),
           "(c) semd was killed and restarted %d times" % kills)
        ok(counts.get("grants", 0) >= 2 * CLIENTS,
           "(c) real progress: %d grants acknowledged" %
           counts.get("grants", 0))
        ok(counts.get("attach OK", 0) > 0, "bound permits were ATTACHed back "
           "after restarts (%d)" % counts.get("attach OK", 0), repr(counts))

        for sem, cap in sorted(SEMS.items()):
            check_capacity(sem, cap, [b for cl in clients
                                      for b in cl.beliefs if b[0] == sem], t0)
        acked = [a for cl in clients for a in cl.acked]
        check_tokens_unique(acked)
        top = {}
        for tok, gen, _ in acked:
            if gen is not None:
                top[gen] = max(top.get(gen, 0), tok)
        back = []
        for tok, gen, sem in acked:
            if gen is None:
                continue
            before = [top[g] for g in top if g < gen]
            if before and tok <= max(before):
                back.append((tok, gen, max(before)))
        ok(not back, "(b) every semd acknowledged only tokens above those "
           "of the semds before it", repr(back[:10]))
        ok(not mon.over, "(d) semd's INFO never showed used > capacity",
           repr(mon.over[:5]))
        bad = [b for cl in clients for b in cl.bad_notheld]
        ok(not bad, "(e) no RELEASE of a grant still held got ERR NOTHELD",
           repr(bad[:10]))
        p.stop()


run(test_chaos, time_limit=int(SECONDS) + 120)
