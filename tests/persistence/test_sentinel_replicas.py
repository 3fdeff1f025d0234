#!/usr/bin/env python3
"""Sentinel and redis-min-replicas together (issue 19, item 4): the two
halves were built and tested apart (test_sentinel.py, test_replicas.py);
this is the setting the README recommends, run as a whole.

A master, TWO replicas and three sentinels (quorum 2,
down-after-milliseconds 1000, failover-timeout 5000), all private on
127.0.0.1 and free ports, stopped by PID; semd on `sentinel://...` with
`redis-min-replicas 1` and an owner-lease longer than the failover.

1. Clients acquire (and release some) leases in a loop from several
   connections while the master is killed. Sentinel promotes one replica;
   semd must grant again within the failover time (the kill until the
   sentinels name a replica) plus 2 s; every grant answered OK (before,
   during and after the kill) is listed by HOLDERS, unless its RELEASE
   was answered OK; each client's tokens keep increasing and those after
   the failover are above every earlier one; the remaining replica,
   which Sentinel points at the new master, acknowledges, so grants go on
   (and it holds them). semd restarted (kill -9) right after the
   failover finds every lease on the new master, and tokens go on up.
2. Then that last replica is stopped: with N=1 and no replica, grants
   get ERR UNAVAILABLE and nothing is granted (HOLDERS unchanged).
3. A planned SENTINEL FAILOVER under the same load (the old master is
   paused and becomes a replica while semd's writes and WAITs are on
   it): semd moves, every grant answered OK is listed, tokens increase,
   the client connections survive.
"""
import os
import re
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403

FOLLOW_S = 2.0          # the contract: failover time + 2 s
NCLIENTS = 4


def sentinel_master(ss):
    """What the first sentinel that answers names as the master."""
    for s in ss:
        try:
            return s.master_addr()
        except (OSError, EOFError, RedisError):
            continue
    return None


class Loader(threading.Thread):
    """One client: ACQUIRE s LEASE 600000 in a loop, RELEASE every third
    grant. Records what semd answered: granted (token -> monotonic time
    of the OK), released (tokens whose RELEASE was answered OK), unsure
    (tokens whose RELEASE got no answer: their state is not asserted),
    the order of tokens and the error replies."""

    def __init__(self, port, stop):
        super().__init__(daemon=True)
        self.port = port
        self.stop_ev = stop
        self.granted = {}
        self.order = []
        self.released = set()
        self.unsure = set()
        self.errors = []
        self.failure = None

    def run(self):
        c = None
        n = 0
        try:
            while not self.stop_ev.is_set():
                if c is None:
                    try:
                        c = connect(self.port, timeout=1.0)
                    except OSError:
                        time.sleep(0.01)
                        continue
                try:
                    got = c.cmd("ACQUIRE s LEASE 600000", 5.0)
                except (OSError, ConnClosed, ReplyTimeout) as e:
                    self.errors.append((time.monotonic(), "%s: %s" %
                                        (type(e).__name__, e)))
                    c.close()
                    c = None
                    continue
                m = re.fullmatch(r"OK ([0-9]+)", got)
                if not m:
                    self.errors.append((time.monotonic(), got))
                    time.sleep(0.005)
                    continue
                tok = int(m.group(1))
                self.granted[tok] = time.monotonic()
                self.order.append(tok)
                n += 1
                if n % 3:
                    continue
                try:
                    got = c.cmd("RELEASE s %d" % tok, 5.0)
                except (OSError, ConnClosed, ReplyTimeout):
                    self.unsure.add(tok)
                    c.close()
                    c = None
                    continue
                if got == "OK":
                    self.released.add(tok)
                else:
                    self.unsure.add(tok)
        except Exception as e:     # reported by the test, not lost
            self.failure = repr(e)
        finally:
            if c is not None:
                c.close()


def test_failover_with_min_replicas():
    m = start_redis()
    reps = [start_replica(m, appendonly=True) for _ in range(2)]
    ss = [Sentinel(m) for _ in range(3)]
    agreed = wait_until(lambda: sentinels_agree(ss, 2), 30, 0.1)
    ok(agreed, "3 sentinels see the master, both replicas and each other")

    p = PSemd(SentinelAddr(ss), ["--semaphore", "s", "1000000",
                                 "--owner-lease", "10s",
                                 "--redis-min-replicas", "1",
                                 "--redis-replica-timeout", "1s"],
              grace="5s")
    c = p.connect()
    eq(c.stats().get("redis_min_replicas"), "1",
       "STATS redis_min_replicas=1")

    stop = threading.Event()
    loaders = [Loader(p.port, stop) for _ in range(NCLIENTS)]
    for ld in loaders:
        ld.start()
    busy = wait_until(lambda: sum(len(ld.granted) for ld in loaders) >= 200,
                      30, 0.05)
    ok(busy, "clients acquire under load before the kill",
       "%d grants" % sum(len(ld.granted) for ld in loaders))

    t_kill = time.monotonic()
    m.kill()
    promoted = [r.addr() for r in reps]
    switched = wait_until(lambda: sentinel_master(ss) in promoted, 30, 0.02)
    t_switch = time.monotonic()
    ok(switched, "the sentinels promote one of the replicas",
       "they name %s" % attempt(sentinel_master, ss))
    new = next((r for r in reps if r.addr() == sentinel_master(ss)), None)
    if new is None:
        stop.set()
        return
    other = next(r for r in reps if r is not new)
    # The outage as clients see it: from the first refusal after the kill
    # (grants already in flight may still be answered OK just after it)
    # to the first grant after that refusal.
    def first_error():
        return min((at for ld in loaders for at, _ in list(ld.errors)
                    if at > t_kill), default=None)

    def regranted():
        t0 = first_error()
        return t0 is not None and any(t > t0 for ld in loaders
                                      for t in list(ld.granted.values()))
    resumed = wait_until(regranted, 30, 0.01)
    ok(resumed, "the clients get grants again after the failover",
       "errors %s; log:\n%s" % ([ld.errors[-3:] for ld in loaders],
                                log_tail(p.log_text())))
    if not resumed:
        stop.set()
        return
    t_err = first_error()
    t_grant = min(t for ld in loaders for t in list(ld.granted.values())
                  if t > t_err)
    refusals = sorted(set(e for ld in loaders for at, e in ld.errors
                          if at > t_kill))
    note("what the clients got during the failover: %s" % refusals[:5])
    failover_s = t_switch - t_kill
    follow_s = t_grant - t_switch
    note("measured (redis-min-replicas 1, %d clients): master killed -> "
         "sentinels name a replica %.2f s; -> semd grants again %.2f s "
         "later (%.2f s after the kill; below 0 when semd heard "
         "+switch-master before this test's poll of the sentinels did)" %
         (NCLIENTS, failover_s, follow_s, t_grant - t_kill))
    ok(follow_s <= FOLLOW_S, "semd follows within the failover time + "
       "%.0f s" % FOLLOW_S, "%.2f s after the sentinels switched" %
       follow_s)
    # Grants go on: the remaining replica replicates from the new master
    # and acknowledges (with N=1 nothing is granted otherwise).
    after = sum(1 for ld in loaders for t in ld.granted.values()
                if t > t_switch)
    more = wait_until(lambda: sum(1 for ld in loaders
                                  for t in ld.granted.values()
                                  if t > t_switch) >= after + 100, 30, 0.05)
    ok(more, "grants go on after the failover (the remaining replica "
       "acknowledges)")
    linked = wait_until(lambda: connected_replicas(new) >= 1, 20, 0.05)
    ok(linked, "the remaining replica follows the new master")
    stop.set()
    for ld in loaders:
        ld.join(30)
    eq([ld.failure for ld in loaders], [None] * NCLIENTS,
       "no client thread failed")

    granted = {}
    for ld in loaders:
        granted.update(ld.granted)
    released = set().union(*(ld.released for ld in loaders))
    unsure = set().union(*(ld.unsure for ld in loaders))
    before = [t for t, at in granted.items() if at < t_kill]
    note("%d grants answered OK before the kill, %d in all, %d released"
         % (len(before), len(granted), len(released)))
    h = set(holders(c, "s"))
    missing = sorted(t for t in granted
                     if t not in released and t not in unsure and
                     t not in h)
    ok(not missing, "HOLDERS lists every grant answered OK (before the "
       "kill: %d) that was not released" % len(before),
       "%d missing: %s" % (len(missing), missing[:20]))
    back = sorted(t for t in released if t in h)
    ok(not back, "no released lease comes back", "%s" % back[:20])
    mono = all(all(a < b for a, b in zip(ld.order, ld.order[1:]))
               for ld in loaders)
    ok(mono, "each client's tokens keep increasing")
    top = max(before)
    later = [t for t, at in granted.items() if at > t_switch]
    ok(later and min(later) > top, "tokens after the failover are above "
       "every earlier one", "min after %s, max before %d" %
       (min(later) if later else None, top))
    in_other = wait_until(lambda: redis_as_memory(other) ==
                          memory_state(c), 10, 0.05)
    ok(in_other, "the remaining replica holds what semd holds",
       "replica %s\nmemory %s" % (attempt(redis_as_memory, other),
                                  attempt(memory_state, c)))
    ok(redis_as_memory(new) == memory_state(c), "the new master holds what "
       "semd holds")

    # A restart of semd right after the failover: it claims the new master
    # (the claim too needs the replica's WAIT) and loads every lease.
    expected = sorted(memory_state(c)["s"]["grants"])
    c.close()
    t_restart = time.monotonic()
    p.restart()
    note("measured: semd restarted (kill -9) on the new master serves "
         "again %.2f s later (the killed owner's key expires first: "
         "owner-lease 10 s)" % (time.monotonic() - t_restart))
    c = p.connect()
    eq(sorted(holders(c, "s")), expected, "after a restart on the new "
       "master, HOLDERS lists the same %d leases" % len(expected))
    t3 = expect_token(c, "ACQUIRE s LEASE 600000", "a grant after the "
                      "restart (the replica acknowledges)")
    ok(t3 > max(granted), "tokens keep increasing after the restart",
       "%d after %d" % (t3, max(granted)))

    # N=1 and every replica stopped: nothing is granted.
    other.kill()
    gone = wait_until(lambda: connected_replicas(new) == 0, 15, 0.05)
    ok(gone, "the new master sees its last replica gone")
    h0 = sorted(holders(c, "s"))
    for i in range(3):
        got = c.cmd("ACQUIRE s LEASE 600000", 15)
        ok(got.startswith("ERR UNAVAILABLE"), "with no replica left, "
           "ACQUIRE -> ERR UNAVAILABLE (%d)" % (i + 1), repr(got))
    got = c.cmd("TRY s", 15)
    ok(got.startswith("ERR UNAVAILABLE"), "TRY -> ERR UNAVAILABLE too",
       repr(got))
    eq(sorted(holders(c, "s")), h0, "nothing was granted (HOLDERS "
       "unchanged)")
    st = c.stats()
    ok(int(st.get("redis_unacked_writes", "0")) > 0, "STATS counts the "
       "unacknowledged writes", repr(st.get("redis_unacked_writes")))
    print("# semd's log:\n" + log_tail(p.log_text(), 15))


def test_manual_failover_with_min_replicas():
    """SENTINEL FAILOVER under load: the old master is paused, then made
    a replica (writes to it answer READONLY, a WAIT sent to it may find
    no replica): semd must move with its clients' grants intact."""
    m = start_redis()
    reps = [start_replica(m, appendonly=True) for _ in range(2)]
    ss = [Sentinel(m) for _ in range(3)]
    agreed = wait_until(lambda: sentinels_agree(ss, 2), 30, 0.1)
    ok(agreed, "3 sentinels see the master, both replicas and each other")
    p = PSemd(SentinelAddr(ss), ["--semaphore", "s", "1000000",
                                 "--owner-lease", "10s",
                                 "--redis-min-replicas", "1",
                                 "--redis-replica-timeout", "1s"],
              grace="5s")
    c = p.connect()
    stop = threading.Event()
    loaders = [Loader(p.port, stop) for _ in range(NCLIENTS)]
    for ld in loaders:
        ld.start()
    busy = wait_until(lambda: sum(len(ld.granted) for ld in loaders) >= 200,
                      30, 0.05)
    ok(busy, "clients acquire under load before the failover")
    t0 = time.monotonic()
    eq(ss[0].cmd("SENTINEL", "failover", MASTER_NAME), "OK",
       "SENTINEL FAILOVER is accepted")
    promoted = [r.addr() for r in reps]
    switched = wait_until(lambda: sentinel_master(ss) in promoted, 30, 0.02)
    t_switch = time.monotonic()
    ok(switched, "the sentinels name a replica as the master")
    more = wait_until(lambda: sum(1 for ld in loaders
                                  for t in list(ld.granted.values())
                                  if t > t_switch) >= 100, 30, 0.05)
    ok(more, "grants go on on the new master")
    stop.set()
    for ld in loaders:
        ld.join(30)
    eq([ld.failure for ld in loaders], [None] * NCLIENTS,
       "no client thread failed")
    later = [t for ld in loaders for t in ld.granted.values() if t > t_switch]
    if later:
        note("measured: SENTINEL FAILOVER with redis-min-replicas 1 -> "
             "first grant on the new master %.2f s later" % (min(later) - t0))
    granted = {}
    for ld in loaders:
        granted.update(ld.granted)
    released = set().union(*(ld.released for ld in loaders))
    unsure = set().union(*(ld.unsure for ld in loaders))
    h = set(holders(c, "s"))
    missing = sorted(t for t in granted
                     if t not in released and t not in unsure and
                     t not in h)
    ok(not missing, "HOLDERS lists every grant answered OK that was not "
       "released (%d)" % len(granted), "%d missing: %s" %
       (len(missing), missing[:20]))
    mono = all(all(a < b for a, b in zip(ld.order, ld.order[1:]))
               for ld in loaders)
    ok(mono, "each client's tokens keep increasing")
    new = next(r for r in reps if r.addr() == sentinel_master(ss))
    same = wait_until(lambda: redis_as_memory(new) == memory_state(c), 10,
                      0.05)
    ok(same, "the new master holds what semd holds")
    demoted = wait_until(lambda: attempt(m.cmd, "ROLE").startswith(
        "['slave'"), 20, 0.05)
    ok(demoted, "the old master lives on as a replica")
    expect(c, "PING", "OK PONG", "the client connection survived")


run(test_failover_with_min_replicas, test_manual_failover_with_min_replicas,
    time_limit=240)
