#!/usr/bin/env python3
"""Failover chaos (issue 7): 30 s of 20 client threads acquiring, holding
and releasing permits (bound and leased, n 1..2, with TIMEOUT) on small
semaphores against two semd, both `standby yes` on one Redis, each
reaching Redis through its own TCP proxy in this test. Every 2-4 s the
owner is killed (kill -9, then restarted as a standby on its port) or
partitioned from Redis (its proxy paused until the other has taken over,
then resumed), so the roles swap. Clients know both addresses: they use a
connection only after ROLE said owner, follow `ERR STANDBY owner=X`, try
the other daemon when a connection is lost, and ATTACH their bound
permits back (RELEASE their leases) on the new owner.

Checked afterwards from the clients' own observations, on this process's
one monotonic clock (as tests/persistence/test_chaos.py does):
(a) at no instant do the grants the clients believe held sum above a
    semaphore's capacity. A client believes a bound grant held from
    reading `OK <token>` (or the OK of a later ATTACH) until it sends
    RELEASE or sees its connection closed (it watches the socket while it
    holds); a lease from reading OK until it sends RELEASE or the lease
    ends by its own clock counted from when it SENT the ACQUIRE;
(b) no token is acknowledged twice, and tokens acknowledged under an epoch
    are above every token acknowledged under the epochs before it;
(c) both daemons served as owner, failovers happened, grants went on;
(d) the owner's INFO never shows used above capacity;
(e) no acknowledged grant was lost: a RELEASE of a lease before it ended
    or of a bound grant on its live connection never got ERR NOTHELD; an
    ATTACH within reclaim-grace of the connection loss never got ERR
    NOTHELD; after every failover the new owner's HOLDERS lists every
    long lease acknowledged before it;
(f) a connection on which ROLE said owner never got ERR STANDBY (a daemon
    that loses ownership closes its connections).
Set CHAOS_SECONDS / CHAOS_SEED to vary the run."""
import os
import random
import re
import select
import sys
import threading
import time
import traceback

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403

SEMS = {"c3": 3, "c2": 2, "c6": 6}
KEEP = "keep"                   # long leases, never released by clients
CLIENTS = 20
SECONDS = float(os.environ.get("CHAOS_SECONDS", "30"))
SEED = int(os.environ.get("CHAOS_SEED", str(int(time.time()))))
LEASE_MS = 1500                 # owner-lease
GRACE_S = 3.0                   # reclaim-grace
LIMIT = LEASE_MS / 1000.0 + 1.0 + 3.0   # failover bound, with slack
INF = float("inf")

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


class Client(threading.Thread):
    def __init__(self, idx, world):
        super().__init__(name="client%d" % idx, daemon=True)
        self.idx = idx
        self.w = world
        self.rng = random.Random(SEED * 1000 + idx)
        self.cur = self.rng.randrange(len(world.ports))
        self.conn = None
        self.epoch = None
        self.serial = 0
        self.beliefs = []   # (sem, n, start, end, token, kind)
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
                c = connect(self.w.ports[self.cur], timeout=2)
            except OSError:
                self.count("connect refused")
                self.other()
                continue
            try:
                ro = role_of(c, 3)
            except (OSError, ConnClosed, ReplyTimeout, AssertionError):
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
        t_sent = now()
        try:
            self.conn.send(line + "\r\n")
            rep = self.conn.line(timeout)
        except (OSError, ConnClosed, ReplyTimeout):
            self.drop()
            self.other()
            return None, t_sent, now()
        sb = standby_reply(rep)
        if sb is not None:
            self.standby_on_owner.append((line, rep, self.epoch))
            self.drop()
            self.follow(sb[0])
            return None, t_sent, now()
        return rep, t_sent, now()

    def wait_closed(self, seconds):
        """Watch the connection for seconds: the time it was seen closed,
        or None if it stayed open."""
        end = now() + seconds
        while True:
            left = end - now()
            if left <= 0:
                return None
            r, _, _ = select.select([self.conn.sock], [], [], left)
            if not r:
                return None
            try:
                data = self.conn.sock.recv(4096)
            except (ConnectionResetError, BrokenPipeError):
                data = b""
            if not data:
                t = now()
                self.drop()
                self.other()
                return t
            self.conn.buf += data
            self.count("unsolicited bytes")

    def run(self):
        try:
            self.loop()
        except Exception:
            self.error = traceback.format_exc()
        finally:
            self.drop()

    def loop(self):
        for _ in range(100000):
            if now() >= self.w.end or self.w.stop:
                return
            if self.conn is None and not self.connect():
                return
            if self.rng.random() < 0.08:
                rep, t_sent, t_rep = self.req("TRY %s LEASE 120000" % KEEP,
                                              10)
                m = re.fullmatch(r"OK ([0-9]+)", rep or "")
                if m:
                    self.kept.append((int(m.group(1)), t_rep))
                    self.acked.append((int(m.group(1)), self.epoch, KEEP))
                    self.count("kept leases")
                continue
            sem = self.rng.choice(sorted(SEMS))
            n = self.rng.choice((1, 1, 2))
            lease_ms = self.rng.randint(300, 1500) \
                if self.rng.random() < 0.4 else None
            line = "ACQUIRE %s %d TIMEOUT %d" % (sem, n,
                                                 self.rng.randint(50, 2000))
            if lease_ms is not None:
                line += " LEASE %d" % lease_ms
            epoch = self.epoch
            rep, t_sent, t_rep = self.req(line, 10)
            if rep is None:
                self.count("acquire lost")
                continue
            m = re.fullmatch(r"OK ([0-9]+)", rep)
            if not m:
                self.count(rep.split()[0] if rep.startswith("TIMEOUT") else
                           " ".join(rep.split()[:2]))
                if rep.startswith("ERR"):
                    time.sleep(0.05)
                continue
            tok = int(m.group(1))
            self.acked.append((tok, epoch, sem))
            self.count("grants")
            if lease_ms is not None:
                self.hold_lease(sem, n, tok, t_rep, t_sent + lease_ms / 1e3)
            else:
                self.hold_bound(sem, n, tok, t_rep)

    def believe(self, sem, n, start, end, tok, kind):
        if end > start:
            self.beliefs.append((sem, n, start, end, tok, kind))

    def hold_bound(self, sem, n, tok, start):
        hold = self.rng.uniform(0.02, 0.4)
        for _ in range(20):
            t_lost = self.wait_closed(hold)
            if t_lost is None:
                rep, t_sent, _ = self.req("RELEASE %s %d" % (sem, tok), 5)
                self.believe(sem, n, start, t_sent, tok, "conn")
                if rep is None:
                    self.count("release lost")
                    return
                self.count("release " + " ".join(rep.split()[:2]))
                if rep.startswith("ERR NOTHELD"):
                    self.bad_notheld.append((sem, tok, "conn", rep))
                return
            # closed under us: take it back from the owner
            self.believe(sem, n, start, t_lost, tok, "conn")
            self.count("bound conn lost")
            while True:
                if not self.connect():
                    return
                rep, _, t_rep = self.req("ATTACH %s %d" % (sem, tok), 5)
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
            start = t_rep
            hold = self.rng.uniform(0.02, 0.2)

    def hold_lease(self, sem, n, tok, start, lease_end):
        t_lost = self.wait_closed(self.rng.uniform(0.02, 0.4))
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
            if rep is None:
                continue            # lost: RELEASE it on the next owner
            self.count("release " + " ".join(rep.split()[:2]) +
                       (" after failover" if t_lost else ""))
            # after a lost RELEASE, NOTHELD may be that RELEASE's doing
            if rep.startswith("ERR NOTHELD") and t_sent == first_sent and \
                    t_sent < lease_end - 0.1:
                self.bad_notheld.append((sem, tok, "lease", rep))
            break
        self.believe(sem, n, start, min(first_sent or INF, lease_end), tok,
                     "lease")


class Monitor(threading.Thread):
    """Polls INFO on whichever daemon answers it: used <= capacity."""

    def __init__(self, world):
        super().__init__(name="monitor", daemon=True)
        self.w = world
        self.over = []
        self.polls = 0
        self.error = None

    def run(self):
        conns = [None] * len(self.w.ports)
        try:
            while now() < self.w.end and not self.w.stop:
                for i, port in enumerate(self.w.ports):
                    try:
                        if conns[i] is None:
                            conns[i] = connect(port, timeout=2)
                        for sem in SEMS:
                            r = conns[i].cmd("INFO " + sem)
                            if not r.startswith("OK "):
                                break
                            info = parse_kv(r[3:])
                            self.polls += 1
                            if int(info["used"]) > int(info["capacity"]):
                                self.over.append((port, info))
                    except (OSError, ConnClosed, ReplyTimeout):
                        if conns[i] is not None:
                            conns[i].close()
                        conns[i] = None
                time.sleep(0.1)
        except Exception:
            self.error = traceback.format_exc()
        finally:
            for c in conns:
                if c is not None:
                    c.close()


def overbooked(beliefs, cap):
    """The first instant where the belief intervals [start, end) of one
    semaphore sum above cap, with the grants then held; or None."""
    events = []
    for i, b in enumerate(beliefs):
        events.append((b[2], 1, i))
        events.append((b[3], 0, i))     # ends sort before starts
    events.sort()
    held = {}
    total = 0
    for t, kind, i in events:
        if kind:
            held[i] = beliefs[i]
            total += beliefs[i][1]
            if total > cap:
                return t, list(held.values())
        else:
            total -= held.pop(i)[1]
    return None


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
        mon = Monitor(w)
        for th in clients + [mon]:
            th.start()
        rng = random.Random(SEED)
        events = []          # (action, victim, new owner, seconds, epoch)
        owners = {first}
        epochs = [ro["epoch"] if ro else 0]
        missing_kept = []
        bad_epoch = []
        stuck = []
        try:
            for _ in range(100):
                nap = rng.uniform(2.0, 4.0)
                if now() + nap + LIMIT >= w.end:
                    break
                time.sleep(nap)
                v, ro = current_owner(daemons, LIMIT)
                if v is None:
                    stuck.append("no owner before an event")
                    break
                # alternate, so that partitions (which always swap the
                # roles) and kills both happen
                action = ("kill", "partition")[(len(events) + SEED) % 2]
                t_ev = now()
                kept = set(t for cl in clients for t, tr in list(cl.kept)
                           if tr < t_ev)
                if action == "kill":
                    daemons[v].kill9()
                    o = 1 - v
                    ro2, t_o = wait_role(daemons[o].port, "owner",
                                         LIMIT + 3)
                    i = o if t_o is not None else None
                    daemons[v].start()          # comes back as a standby
                else:
                    proxies[v].pause()
                    o = 1 - v
                    ro2, t_o = wait_role(daemons[o].port, "owner",
                                         LIMIT + 3)
                    i = o if t_o is not None else None
                    time.sleep(rng.uniform(0.0, 1.0))
                    proxies[v].resume()
                    rv, t_v = wait_role(daemons[v].port, "standby", LIMIT)
                    if t_v is None:
                        stuck.append("the partitioned owner did not become "
                                     "a standby after resume: %r" % (rv,))
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
                try:
                    with connect(daemons[i].port, timeout=2) as c:
                        h = holders(c, KEEP)
                    gone = sorted(kept - set(h))
                    if gone:
                        missing_kept.append((action, ro2["epoch"], gone))
                except (OSError, ConnClosed, ReplyTimeout,
                        AssertionError) as e:
                    note("HOLDERS %s after the %s: %s" % (KEEP, action, e))
        finally:
            left = w.end - now()
            if left > 0:
                time.sleep(left)
            for th in clients + [mon]:
                th.join(max(0.1, w.end + 20 - now()))
            w.stop = True
            for px in proxies:
                px.resume()

        for a in events:
            note("%s of %s: %s owner after %.3f s (epoch %d)" %
                 (a[0], "AB"[a[1]], "AB"[a[2]], a[3], a[4]))
        hung = [th.name for th in clients + [mon] if th.is_alive()]
        ok(not hung, "every client thread finished", repr(hung))
        errors = [(th.name, th.error) for th in clients + [mon] if th.error]
        ok(not errors, "no client thread raised", errors[:1])
        ok(not stuck, "(c) there was always an owner again after a failover",
           repr(stuck))
        ok(len(events) >= max(2, int(SECONDS / 10)),
           "(c) %d failovers (%d kills, %d partitions)" % (
               len(events), sum(1 for a in events if a[0] == "kill"),
               sum(1 for a in events if a[0] == "partition")))
        ok(owners == {0, 1}, "(c) both daemons served as owner (roles "
           "swapped)", repr(owners))
        slow = [a for a in events if a[3] > LIMIT]
        ok(not slow, "(c) every failover took under owner-lease + 1 s "
           "(+3 s slack): max %.3f s" % max([a[3] for a in events] or [0]),
           repr(slow))
        ok(not bad_epoch, "(b) each new owner's epoch is larger",
           repr(epochs))

        counts = {}
        for cl in clients:
            for k, v in cl.counts.items():
                counts[k] = counts.get(k, 0) + v
        note(", ".join("%s=%d" % kv for kv in sorted(counts.items())))
        note("monitor polls %d" % mon.polls)
        ok(counts.get("grants", 0) >= 2 * CLIENTS,
           "(c) real progress: %d grants acknowledged" %
           counts.get("grants", 0))
        ok(counts.get("attach OK", 0) > 0, "bound permits were ATTACHed back "
           "on the new owner (%d)" % counts.get("attach OK", 0),
           repr(counts))

        for sem, cap in sorted(SEMS.items()):
            bel = [b for cl in clients for b in cl.beliefs if b[0] == sem]
            bad = overbooked(bel, cap)
            ok(bad is None, "(a) %s: the grants clients believed held never "
               "sum above capacity %d (%d belief intervals)" %
               (sem, cap, len(bel)),
               bad and "at t=%.3f: %r" % (bad[0] - t0, [
                   (b[4], b[1], b[5], round(b[2] - t0, 3),
                    round(b[3] - t0, 3)) for b in bad[1]]))
        acked = [a for cl in clients for a in cl.acked]
        toks = [a[0] for a in acked]
        dups = sorted(t for t in set(toks) if toks.count(t) > 1)
        ok(not dups, "(b) no token was acknowledged twice (%d tokens)" %
           len(toks), repr(dups[:10]))
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


run(test_failover_chaos, time_limit=int(SECONDS) + 60)
