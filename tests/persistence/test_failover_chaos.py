#!/usr/bin/env python3
"""Failover chaos (issues 7 and 16): 20 client threads acquiring, holding
and releasing permits (bound and leased, n 1..2, with TIMEOUT) on small
semaphores against two semd, both `standby yes` on one Redis, each
reaching Redis through its own TCP proxy in this test. Every 1.5-3 s one
event, in a seed-driven order: the owner is killed (kill -9, then
restarted as a standby on its port), partitioned from Redis (its proxy
paused both ways until the other has taken over, then resumed), cut off
one way (Redis's replies dropped, its writes still landing), stopped
(SIGSTOP until the other has taken over, then SIGCONT), or Redis is
flushed (FLUSHALL: the owner must keep its claim and rewrite Redis, the
standby must not claim the empty data set). Clients know both addresses:
they use a connection only after ROLE said owner, follow `ERR STANDBY
owner=X`, try the other daemon when a connection is lost, PING while they
hold a bound permit, and ATTACH their bound permits back (RELEASE their
leases) on the new owner.

Checked afterwards from the clients' own observations with the one
checker of tests/chaosmodel.py (see there for the belief model, including
the client-side bound of bound permits: reclaim-grace after the send time
of the last answered request on their connection):
(a) at no instant do the grants the clients believe held sum above a
    semaphore's capacity;
(b) no token is acknowledged twice; per semaphore, a grant asked for after
    another was acknowledged has the larger token; each new owner's epoch
    is larger;
(c) there was always an owner again, failovers happened, grants went on;
(d) the owner's INFO never shows used above capacity;
(e) no acknowledged grant was lost: a RELEASE of a lease before it ended
    or of a bound grant on its live connection never got ERR NOTHELD; an
    ATTACH within reclaim-grace of the connection loss never got ERR
    NOTHELD; after every event the owner's HOLDERS lists every long lease
    acknowledged before it;
(f) a connection on which ROLE said owner never got ERR STANDBY (a daemon
    that loses ownership closes its connections).
CHAOS_SECONDS (20) per seed; CHAOS_SEEDS (2) seeds from CHAOS_SEED (the
time): `make check-slow` runs 5 seeds of 60 s."""
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
from chaosmodel import (Grant, Session, Monitor, overbooked,  # noqa: E402
                        beliefs_of, token_problems, random_acquire,
                        chaos_acquire, ChaosClient,
                        check_capacity, check_tokens_unique,
                        finish_run, check_threads)

SEMS = {"c3": 3, "c2": 2, "c6": 6}
KEEP = "keep"                   # long leases, never released by clients
CLIENTS = 20
SECONDS = float(os.environ.get("CHAOS_SECONDS", "20"))
SEED0 = int(os.environ.get("CHAOS_SEED", str(int(time.time()))))
# seeds 3 apart: two short runs start their turn of events 3 apart, so
# that together they meet every kind of event
SEEDS = [SEED0 + 3 * i
         for i in range(int(os.environ.get("CHAOS_SEEDS", "2")))]
SEED = SEED0                    # the seed of the run in progress
ACTIONS = ("kill", "partition", "stop", "oneway", "flush")
LEASE_MS = 1500                 # owner-lease
GRACE_S = 3.0                   # reclaim-grace
LIMIT = LEASE_MS / 1000.0 + 1.0 + 3.0   # failover bound, with slack
PING_S = 0.3                    # a holder of a bound permit PINGs this often
PING_WAIT_S = 1.0               # and gives its connection up after this

now = time.monotonic


class World:
    def __init__(self, ports, end):
        self.ports = list(ports)
        self.end = end
        self.stop = False


def addr_index(w, addr):
    for i, p in enumerate(w.ports):
        if addr == "127.0.0.1:%d" % p:
            return i
    return None


class Client(ChaosClient):
    def __init__(self, idx, world):
        super().__init__(name="client%d" % idx, daemon=True)
        self.idx = idx
        self.w = world
        self.rng = random.Random(SEED * 1000 + idx)
        self.cur = self.rng.randrange(len(world.ports))
        self.conn = None        # a chaosmodel Session
        self.epoch = None
        self.serial = 0
        self.grants = []    # chaosmodel Grants (ATTACHes too)
        self.acked = []     # (token, epoch, sem)
        self.kept = []      # (token, t_rep) of long leases on KEEP
        self.counts = {}
        self.bad_notheld = []
        self.lost_attach = []
        self.standby_on_owner = []
        self.error = None

    def count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    def other(self):
        self.cur = (self.cur + 1) % len(self.w.ports)

    def connect(self):
        """Connect to a daemon that says ROLE owner, following ERR
        STANDBY / ROLE owner= and trying the other on failure. False when
        time is up."""
        self.drop()
        tries = 0
        while now() < self.w.end + 10 and not self.w.stop:
            tries += 1
            if tries > 1:
                time.sleep(min(0.2, 0.01 * 2 ** min(tries, 5)) *
                           self.rng.uniform(0.5, 1.0))
            try:
                c = Session(self.w.ports[self.cur], timeout=2)
            except OSError:
                self.count("connect refused")
                self.other()
                continue
            rep, _, _ = c.req("ROLE", 3)
            try:
                ro = role_reply(rep)
            except AssertionError:
                c.close()
                self.other()
                continue
            if ro["role"] == "owner":
                self.conn = c
                self.epoch = ro["epoch"]
                self.serial += 1
                self.count("connects")
                return True
            c.close()
            self.follow(ro["owner"])
        return False

    def follow(self, owner):
        i = addr_index(self.w, owner)
        if i is None or i == self.cur:
            self.other()
        else:
            self.cur = i

    def drop(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def req(self, line, timeout):
        """(reply or None if the connection was lost, t_sent, t_reply).
        An ERR STANDBY drops the connection and points at the owner."""
        rep, t_sent, t_rep = self.conn.req(line, timeout)
        if rep is None:
            self.drop()
            self.other()
            return None, t_sent, t_rep
        sb = standby_reply(rep)
        if sb is not None:
            self.standby_on_owner.append((line, rep, self.epoch))
            self.drop()
            self.follow(sb[0])
            return None, t_sent, t_rep
        return rep, t_sent, t_rep

    def hold_watch(self, seconds):
        """Hold for seconds, watching the connection and PINGing it every
        PING_S (a careful holder of a bound permit learns that its owner
        is gone, and keeps its client-side bound alive): the time the
        connection was seen lost, or None if it stayed open."""
        end = now() + seconds
        while True:
            left = end - now()
            if left <= 0:
                return None
            if self.conn.watch(min(PING_S, left)):
                t = self.conn.t_closed
                self.drop()
                self.other()
                return t
            if end - now() > 0:
                rep, _, _ = self.req("PING", PING_WAIT_S)
                if rep is None:
                    return now()
                if rep != "OK PONG":
                    self.count("unexpected PING reply")

    def loop(self):
        for _ in self.turns():
            if self.rng.random() < 0.08:
                rep, t_sent, t_rep = self.req("TRY %s LEASE 120000" % KEEP,
                                              10)
                m = re.fullmatch(r"OK ([0-9]+)", rep or "")
                if m:
                    self.kept.append((int(m.group(1)), t_rep))
                    self.grants.append(Grant(KEEP, 1, int(m.group(1)),
                                             "lease", t_sent, t_rep,
                                             None, 120000))
                    self.acked.append((int(m.group(1)), self.epoch, KEEP))
                    self.count("kept leases")
                continue
            sem, n, lease_ms, line = random_acquire(self.rng, SEMS)
            epoch = self.epoch
            got = chaos_acquire(self, line, "acquire lost")
            if got is None:
                continue
            tok, t_sent, t_rep = got
            self.acked.append((tok, epoch, sem))
            g = Grant(sem, n, tok, "lease" if lease_ms else "conn", t_sent,
                      t_rep, self.conn, lease_ms)
            self.grants.append(g)
            if lease_ms is not None:
                self.hold_lease(g)
            else:
                self.hold_bound(g)

    def hold_bound(self, g):
        hold = self.rng.uniform(0.02, 0.4)
        sem, tok = g.sem, g.token
        for _ in range(20):
            t_lost = self.hold_watch(hold)
            if t_lost is None:
                rep, t_sent, _ = self.req("RELEASE %s %d" % (sem, tok), 5)
                g.released(t_sent)
                if rep is None:
                    self.count("release lost")
                    return
                self.count("release " + " ".join(rep.split()[:2]))
                if rep.startswith("ERR NOTHELD"):
                    self.bad_notheld.append((sem, tok, "conn", rep))
                return
            # closed under us: take it back from the owner
            self.count("bound conn lost")
            while True:
                if not self.connect():
                    return
                rep, t_sent, t_rep = self.req("ATTACH %s %d" % (sem, tok), 5)
                if rep is not None:
                    break
                if now() > t_lost + GRACE_S + LIMIT:
                    return
            if rep != "OK":
                self.count("attach " + " ".join(rep.split()[:2]))
                if rep.startswith("ERR NOTHELD") and \
                        t_rep < t_lost + GRACE_S - 0.2:
                    self.lost_attach.append((sem, tok, round(t_rep -
                                                             t_lost, 3)))
                return
            self.count("attach OK")
            g = Grant(sem, g.n, tok, "conn", t_sent, t_rep, self.conn,
                      attach=True)
            self.grants.append(g)
            hold = self.rng.uniform(0.02, 0.2)

    def hold_lease(self, g):
        sem, tok, lease_end = g.sem, g.token, g.lease_end()
        t_lost = self.conn.watch(self.rng.uniform(0.02, 0.4))
        if t_lost:
            self.drop()
            self.other()
        first_sent = None
        for _ in range(20):
            if self.conn is None and not self.connect():
                break
            if now() >= lease_end:
                self.count("lease ran out")
                break
            rep, t_sent, _ = self.req("RELEASE %s %d" % (sem, tok), 5)
            if first_sent is None:
                first_sent = t_sent
                g.released(t_sent)
            if rep is None:
                continue            # lost: RELEASE it on the next owner
            self.count("release " + " ".join(rep.split()[:2]) +
                       (" after failover" if t_lost else ""))
            # after a lost RELEASE, NOTHELD may be that RELEASE's doing
            if rep.startswith("ERR NOTHELD") and t_sent == first_sent and \
                    t_sent < lease_end - 0.1:
                self.bad_notheld.append((sem, tok, "lease", rep))
            break


def current_owner(daemons, timeout):
    """(index, ROLE) of the daemon that says owner, waiting up to
    timeout; (None, None) if none does."""
    deadline = now() + timeout
    while True:
        for i, p in enumerate(daemons):
            ro = role_at(p.port, 1.0)
            if ro is not None and ro["role"] == "owner":
                return i, ro
        if now() >= deadline:
            return None, None
        time.sleep(0.02)


def test_failover_chaos():
    note("seed %d, %.0f s, %d clients, owner-lease %d ms, reclaim-grace "
         "%.1f s" % (SEED, SECONDS, CLIENTS, LEASE_MS, GRACE_S))
    args = ["--semaphore", KEEP, "100000"]
    for name, cap in sorted(SEMS.items()):
        args += ["--semaphore", name, str(cap)]
    args += ownership_args("%dms" % LEASE_MS, standby=True)
    grace = "%dms" % int(GRACE_S * 1000)
    with start_redis() as r, Proxy(r.port) as pxa, Proxy(r.port) as pxb:
        proxies = [pxa, pxb]
        daemons = [PSemd(pxa, args, grace=grace)]
        daemons.append(PSemd(pxb, args, grace=grace))
        first, ro = current_owner(daemons, 5)
        ok(first is not None, "one of the two is the owner at the start",
           repr([role_at(p.port) for p in daemons]))
        t0 = now()
        w = World([p.port for p in daemons], t0 + SECONDS)
        clients = [Client(i, w) for i in range(CLIENTS)]
        mon = Monitor(w.ports, sorted(SEMS),
                      lambda: now() >= w.end or w.stop)
        for th in clients + [mon]:
            th.start()
        rng = random.Random(SEED)
        events = []          # (action, victim, new owner, seconds, epoch)
        owners = {first}
        epochs = [ro["epoch"] if ro else 0]
        missing_kept = []
        bad_epoch = []
        stuck = []
        flushes = []         # (owner before, owner after, ROLE, epoch before)
        drift = []           # ownership changes between events
        n_events = 0

        def check_kept(i, kept, action, ro2):
            """The owner i lists every long lease acknowledged before."""
            try:
                with connect(daemons[i].port, timeout=2) as c:
                    h = holders(c, KEEP)
                gone = sorted(kept - set(h))
                if gone:
                    missing_kept.append((action, ro2["epoch"], gone))
            except (OSError, ConnClosed, ReplyTimeout,
                    AssertionError) as e:
                note("HOLDERS %s after the %s: %s" % (KEEP, action, e))

        try:
            for _ in range(100):
                nap = rng.uniform(1.5, 3.0)
                if now() + nap + 3 >= w.end:
                    break
                time.sleep(nap)
                v, ro = current_owner(daemons, LIMIT)
                if v is None:
                    stuck.append("no owner before an event")
                    break
                if ro["epoch"] != epochs[-1]:
                    # nobody was made to lose ownership since the last event
                    drift.append((round(now() - t0, 3), epochs[-1], ro))
                    epochs.append(ro["epoch"])
                # every kind of event in turn, from a seed-driven start
                action = ACTIONS[(n_events + SEED) % len(ACTIONS)]
                n_events += 1
                t_ev = now()
                note("t=%.3f s: %s, %s owns (epoch %d)" %
                     (t_ev - t0, action, "AB"[v], ro["epoch"]))
                kept = set(t for cl in clients for t, tr in list(cl.kept)
                           if tr < t_ev)
                o = 1 - v
                if action == "flush":
                    eq(r.cmd("FLUSHALL"), "OK", "FLUSHALL at %.1f s" %
                       (t_ev - t0))
                    # the owner keeps its claim: nobody takes over
                    time.sleep(2 * LEASE_MS / 1000.0)
                    i, ro2 = current_owner(daemons, LIMIT)
                    flushes.append((v, i, ro2, ro["epoch"]))
                    if i is None:
                        stuck.append("no owner after a FLUSHALL")
                        break
                    if i != v or ro2["epoch"] != ro["epoch"]:
                        events.append((action, v, i, now() - t_ev,
                                       ro2["epoch"]))
                        if ro2["epoch"] <= epochs[-1]:
                            bad_epoch.append((epochs[-1], ro2["epoch"]))
                        epochs.append(ro2["epoch"])
                    check_kept(i, kept, action, ro2)
                    continue
                if action == "kill":
                    daemons[v].kill9()
                    ro2, t_o = wait_role(daemons[o].port, "owner",
                                         LIMIT + 3)
                    daemons[v].start()          # comes back as a standby
                else:
                    if action == "partition":
                        proxies[v].pause()
                    elif action == "oneway":
                        proxies[v].cut_replies()
                    else:
                        sigstop(daemons[v])
                    ro2, t_o = wait_role(daemons[o].port, "owner",
                                         LIMIT + 3)
                    time.sleep(rng.uniform(0.0, 1.0))
                    if action == "partition":
                        proxies[v].resume()
                    elif action == "oneway":
                        proxies[v].heal()
                    else:
                        sigcont(daemons[v])
                    rv, t_v = wait_role(daemons[v].port, "standby", LIMIT)
                    if t_v is None:
                        stuck.append("the old owner did not become a standby "
                                     "after the %s ended: %r" % (action, rv))
                i = o if t_o is not None else None
                t_new = t_o if t_o is not None else now()
                if i is None:
                    stuck.append("no owner %.1f s after a %s" %
                                 (t_new - t_ev, action))
                    break
                owners.add(i)
                events.append((action, v, i, t_new - t_ev, ro2["epoch"]))
                if ro2["epoch"] <= epochs[-1]:
                    bad_epoch.append((epochs[-1], ro2["epoch"]))
                epochs.append(ro2["epoch"])
                check_kept(i, kept, action, ro2)
        finally:
            finish_run(w, clients + [mon])
            for px in proxies:
                px.resume()
                px.heal()
            for d in daemons:
                sigcont(d)

        for f in flushes:
            note("FLUSHALL while %s owned: %s owner afterwards (%r)" %
                 ("AB"[f[0]], "AB"[f[1]] if f[1] is not None else "none",
                  f[2]))
        for a in events:
            note("%s of %s: %s owner after %.3f s (epoch %d)" %
                 (a[0], "AB"[a[1]], "AB"[a[2]], a[3], a[4]))
        check_threads(clients + [mon])
        ok(not stuck, "(c) there was always an owner again after a failover",
           repr(stuck))
        ok(len(events) >= max(2, int(SECONDS / 10)),
           "(c) %d failovers (%s)" % (len(events), ", ".join(
               "%d %s" % (sum(1 for a in events if a[0] == x), x)
               for x in ACTIONS if x != "flush")))
        moved = [f for f in flushes if f[1] != f[0] or
                 f[2]["epoch"] != f[3]]
        ok(not moved, "(b) after %d FLUSHALLs the owner kept its claim "
           "(the standby never claimed the flushed data set)" %
           len(flushes), "owner before/after, ROLE after: %r" % moved)
        ok(owners == {0, 1}, "(c) both daemons served as owner (roles "
           "swapped)", repr(owners))
        slow = [a for a in events if a[3] > LIMIT]
        ok(not slow, "(c) every failover took under owner-lease + 1 s "
           "(+3 s slack): max %.3f s" % max([a[3] for a in events] or [0]),
           repr(slow))
        ok(not bad_epoch, "(b) each new owner's epoch is larger",
           repr(epochs))
        ok(not drift, "(c) ownership changed only at the events",
           "at t, epoch expected, ROLE seen: %r" % drift)

        counts = {}
        for cl in clients:
            for k, v in cl.counts.items():
                counts[k] = counts.get(k, 0) + v
        note(", ".join("%s=%d" % kv for kv in sorted(counts.items())))
        note("monitor polls %d" % mon.polls)
        ok(counts.get("grants", 0) >= 2 * CLIENTS,
           "(c) real progress: %d grants acknowledged" %
           counts.get("grants", 0))
        # Only a bound permit whose connection closed under its holder
        # can be ATTACHed back. A kill closes them at once; a partition
        # refuses grants (ERR UNAVAILABLE) for over a second before the
        # owner gives up, so its holders may all have released by then
        # (seed 11 has no kill: no bound connection was ever lost).
        if counts.get("bound conn lost", 0) > 0:
            ok(counts.get("attach OK", 0) > 0, "bound permits were ATTACHed "
               "back on the new owner (%d)" % counts.get("attach OK", 0),
               repr(counts))

        grants = [g for cl in clients for g in cl.grants]
        for sem, cap in sorted(SEMS.items()):
            check_capacity(sem, cap, beliefs_of(
                [g for g in grants if g.sem == sem], GRACE_S), t0)
        acked = [a for cl in clients for a in cl.acked]
        check_tokens_unique(acked)
        probs = token_problems(grants)
        ok(not probs, "(b) per semaphore, a grant asked for after another "
           "was acknowledged has the larger token", "; ".join(probs[:5]))
        top = {}
        for tok, ep, _ in acked:
            top[ep] = max(top.get(ep, 0), tok)
        back = []
        for tok, ep, sem in acked:
            before = [top[e] for e in top if e < ep]
            if before and tok <= max(before):
                back.append((tok, ep, sem, max(before)))
        ok(not back, "(b) tokens of each epoch are above every token of the "
           "epochs before it (%d epochs)" % len(top), repr(back[:10]))
        ok(not mon.over, "(d) the owner's INFO never showed used > capacity",
           repr(mon.over[:5]))
        bad = [b for cl in clients for b in cl.bad_notheld]
        ok(not bad, "(e) no RELEASE of a grant still held got ERR NOTHELD",
           repr(bad[:10]))
        bad = [b for cl in clients for b in cl.lost_attach]
        ok(not bad, "(e) no ATTACH within reclaim-grace of the loss got ERR "
           "NOTHELD", repr(bad[:10]))
        ok(not missing_kept, "(e) after every failover the new owner listed "
           "every long lease acknowledged before it (%d kept)" %
           sum(len(cl.kept) for cl in clients), repr(missing_kept[:5]))
        i, _ = current_owner(daemons, LIMIT)
        if i is not None:
            with connect(daemons[i].port, timeout=2) as c:
                h = holders(c, KEEP)
            kept = set(t for cl in clients for t, _ in cl.kept)
            eq(sorted(kept - set(h)), [], "(e) at the end the owner lists "
               "every long lease")
        bad = [b for cl in clients for b in cl.standby_on_owner]
        ok(not bad, "(f) no connection that ROLE called owner answered ERR "
           "STANDBY", repr(bad[:5]))
        for p in daemons:
            p.stop()


def seeded(seed):
    def t():
        global SEED
        SEED = seed
        test_failover_chaos()
    t.__name__ = "test_failover_chaos_seed_%d" % seed
    return t


run(*[seeded(x) for x in SEEDS],
    time_limit=len(SEEDS) * (int(SECONDS) + 60))
