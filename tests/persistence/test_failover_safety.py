#!/usr/bin/env python3
"""Failover safety (issue 16): adversarial scenarios against two semd on
one Redis, both `standby yes`, with a short owner-lease (1 s) and
reclaim-grace (3 s). Clients are sockets that record what they were told
(send time, reply, read time, on this process's monotonic clock) and the
checker of tests/chaosmodel.py decides from those observations alone:

1. A paused owner (SIGSTOP) or a busy one (connections pipelining LIST
   without reading) with a grant in flight: the standby takes over and a
   second client acquires the capacity-1 permit there; the old owner must
   write no `OK` after it was deposed, and no two clients may believe they
   hold the permit at once.
2. FLUSHALL, and a Redis restarted empty, while an owner and a standby run
   with leases held: the standby must not claim the empty data set; the
   owner keeps its claim, rewrites Redis from memory and lists every
   lease; tokens continue above every token issued; after kill -9 of the
   owner the standby takes over with every lease.
3. A one-way partition (writes reach Redis, replies are lost): the owner
   closes its clients' connections at its deadline, the standby takes over
   within a bound, no over-grant, and a `TRY` answered `ERR UNAVAILABLE
   ... nothing was granted` is not held afterwards.
"""
import os
import re
import signal
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403
from chaosmodel import (Grant, Session, acquire, release, check_overgrant,  # noqa
                        check_tokens, missing_leases, now)

LEASE_MS = 1000
LEASE = "%dms" % LEASE_MS
GRACE_S = 3.0
GRACE = "%dms" % int(GRACE_S * 1000)
# the contract: takeover within owner-lease + 1 s; generous for a loaded
# machine and the sanitizer build
LIMIT = 3 * LEASE_MS / 1000.0 + 3.0
# rounds per scenario: on aa86cfb about one round in seven that stops the
# owner right after the send catches it answering after it was deposed
ROUNDS = int(os.environ.get("SAFETY_ROUNDS", "8"))


def roles(pair, timeout=LIMIT + 5):
    """(owner, standby) of a pair by ROLE, once one says owner and the
    other standby; (None, None) if that does not happen in time."""
    deadline = now() + timeout
    while now() < deadline:
        r = [role_at(p.port, 1.0) for p in pair]
        names = [x["role"] if x else None for x in r]
        if names == ["owner", "standby"]:
            return pair[0], pair[1]
        if names == ["standby", "owner"]:
            return pair[1], pair[0]
        time.sleep(0.05)
    return None, None


def wait_takeover(p, timeout=LIMIT):
    ro, t = wait_role(p.port, "owner", timeout, 0.01)
    return ro, t


def clear_sem(port, sem):
    """RELEASE / REVOKE whatever the owner on port still lists under sem
    (after the clients' beliefs ended): the next round starts free."""
    try:
        with connect(port, timeout=3) as c:
            for tok in holders(c, sem):
                c.cmd("REVOKE %s %d" % (sem, tok))
            return holders(c, sem) == {}
    except (OSError, ConnClosed, ReplyTimeout, AssertionError):
        return False


# --------------------------------------------------------------------------
# 1. A paused or busy owner with a grant in flight
# --------------------------------------------------------------------------

FILLERS = 2000          # semaphores that make LIST long for the busy owner


def create_fillers(port, count):
    with connect(port, timeout=10) as c:
        c.send("".join("CREATE filler%04d 1\r\n" % i for i in range(count)))
        got = [c.line(30) for _ in range(count)]
    return all(g == "OK" for g in got)


def deposed_round(r, pair, mode, lease_ms, delay, grants, t0, rnd):
    """One round: A sends ACQUIRE to the owner, the owner is stopped (or
    stalled) right after; once the standby took over, B acquires there;
    then the owner goes on. With mode 'stop' and delay None, Redis is
    paused while A's request goes in, so that the grant's batch waits in
    Redis; the owner is stopped, then Redis resumed: Redis applies the
    batch (the owner key is still the owner's) and its acknowledgement
    sits in the stopped owner's socket. Returns what was seen."""
    o, s = roles(pair)
    if o is None:
        ok(False, "round %d: one owner and one standby at the start" % rnd)
        return None
    tag = "round %d (%s, %s, %s)" % (
        rnd, mode, "LEASE %d" % lease_ms if lease_ms else "bound",
        "ack held in Redis" if delay is None else
        "stop %.1f ms after the send" % (delay * 1000))
    lease = " LEASE %d" % lease_ms if lease_ms else ""
    a = Session(o.port, label="A")
    line = "ACQUIRE one TIMEOUT 500" + lease
    stall = None
    if mode == "busy":
        stall = Stall(o.port, conns=STALL_CONNS, lines=STALL_LINES,
                      start=False)
    if delay is None:
        r.pause()
    t_sent = a.send_only(line)
    if mode == "busy":
        if delay is None:
            time.sleep(0.05)    # the owner sends the batch to Redis
        stall.start()           # the flood: the owner's loop is busy
        if delay is None:
            time.sleep(0.3)
            r.resume()          # the acknowledgement comes meanwhile
    elif delay is None:
        time.sleep(0.1)         # the owner sends the batch to Redis
        sigstop(o)
        r.resume()
        # Redis answers the batch into the stopped owner's socket
        ok(wait_until(lambda: r.cmd("PING") == "PONG", 5),
           "%s: Redis answers again" % tag)
    elif mode == "stop":
        end = now() + delay
        while now() < end:
            pass
        sigstop(o)
    t_stop = now()
    ra = a.reply_in_thread(t_sent, line, LIMIT + 10)
    ro, t_take = wait_takeover(s)
    b = Session(s.port, label="B")
    gb, rb = (None, None)
    if t_take is not None:
        gb, rb = acquire(b, "ACQUIRE one TIMEOUT 300" + lease, 5,
                         label="B@%d" % rnd)
    t_cont = now()
    if mode == "stop":
        sigcont(o)
    else:
        stall.close()
    ra["thread"].join(LIMIT + 12)
    rep_a, t_a = ra.get("reply"), ra.get("t")
    ga = None
    m = re.fullmatch(r"OK ([0-9]+)", rep_a or "")
    if m:
        ga = Grant("one", 1, int(m.group(1)), "lease" if lease_ms else
                   "conn", t_sent, t_a, a, lease_ms, label="A@%d" % rnd)
    rel = (lambda t: "%.3f" % (t - t_stop) if t is not None else "never")
    note("%s: A's reply %r read at %s s after the stop; standby owner at "
         "%s s; B got %r; owner continued at %s s" %
         (tag, rep_a, rel(t_a), rel(t_take), rb, rel(t_cont)))
    if t_take is None:
        ok(mode == "busy", "%s: the standby took over within %.0f s" %
           (tag, LIMIT), "last ROLE %r" % (ro,))
        if mode == "busy":
            note("%s: the stall did not cost the owner its ownership" % tag)
    else:
        ok(ga is None or t_a < t_take, "%s: the deposed owner wrote no OK "
           "after the standby took over" % tag,
           "A read %r %.3f s after the takeover was seen" %
           (rep_a, t_a - t_take) if ga else "")
    # hold a moment, PINGing as a careful holder does, then let go
    for g, sess in ((ga, a), (gb, b)):
        if g is not None:
            grants.append(g)
    end = now() + 1.0
    while now() < end:
        for g, sess in ((ga, a), (gb, b)):
            if g is not None and not sess.closed():
                sess.req("PING", 2)
        time.sleep(0.2)
    owner, _ = roles(pair)
    for g, sess in ((ga, a), (gb, b)):
        if g is None:
            continue
        if g.kind == "lease" and owner is not None:
            try:
                release(Session(owner.port), g)
            except OSError:
                g.released(now())
        elif not sess.closed():
            release(sess, g)
    a.close()
    b.close()
    if owner is not None:
        ok(wait_until(lambda: clear_sem(owner.port, "one"), 10),
           "%s: the permit is free again for the next round" % tag)
    return {"a": rep_a, "b": rb, "take": t_take}


STALL_CONNS = int(os.environ.get("STALL_CONNS", "200"))
STALL_LINES = int(os.environ.get("STALL_LINES", "2000"))


def test_paused_owner_grant_in_flight():
    with start_redis() as r:
        pair = start_pair(r, ["--semaphore", "one", "1"], LEASE, GRACE)
        grants = []
        t0 = now()
        # None: the acknowledgement held in Redis; a number: SIGSTOP that
        # long after the send (0 catches the owner between reading the
        # request and reading Redis's answer most often)
        delays = [0.0, None, 0.0, 0.0005, 0.0, 0.0, None, 0.0]
        for i in range(ROUNDS):
            deposed_round(r, pair, "stop", 10000 if i % 2 else None,
                          delays[i % len(delays)], grants, t0, i + 1)
        check_overgrant(ok, grants, {"one": 1}, GRACE_S, t0,
                        "paused owner: ")
        check_tokens(ok, grants, "paused owner: ")
        for p in pair:
            ok(p.d.alive(), "semd pid %d is alive" % p.d.pid,
               log_tail(p.log_text()))
            p.stop()


def test_busy_owner_grant_in_flight():
    with start_redis() as r:
        pair = start_pair(r, ["--semaphore", "one", "1"], LEASE, GRACE)
        o, _ = roles(pair)
        ok(create_fillers(o.port, FILLERS), "%d more semaphores make LIST "
           "long" % FILLERS)
        grants = []
        t0 = now()
        for i in range(max(2, ROUNDS // 2)):
            deposed_round(r, pair, "busy", 10000 if i % 2 else None,
                          None if i < 2 else 0.0, grants, t0, i + 1)
        check_overgrant(ok, grants, {"one": 1}, GRACE_S, t0, "busy owner: ")
        check_tokens(ok, grants, "busy owner: ")
        for p in pair:
            ok(p.d.alive(), "semd pid %d is alive" % p.d.pid,
               log_tail(p.log_text()))
            p.stop()


# --------------------------------------------------------------------------
# 2. FLUSHALL, or Redis back empty, with leases held
# --------------------------------------------------------------------------

def standby_stays_standby(s, seconds):
    """Poll ROLE on the standby for seconds: every answer must be standby.
    Returns the first other answer, or None."""
    end = now() + seconds
    while now() < end:
        ro = role_at(s.port, 1.0)
        if ro is not None and ro["role"] != "standby":
            return ro
        time.sleep(0.02)
    return None


def held_map(port, sems):
    with connect(port, timeout=3) as c:
        return {sem: set(holders(c, sem)) for sem in sems}


def emptied_rounds(r, pair, how, rounds, grants, t0):
    for rnd in range(1, rounds + 1):
        tag = "%s round %d" % (how, rnd)
        o, s = roles(pair)
        if not ok(o is not None, "%s: one owner and one standby" % tag):
            return
        sess = Session(o.port, label="holder")
        for _ in range(3):
            g, rep = acquire(sess, "TRY k LEASE 60000", 5, label=tag)
            if g is None:
                ok(False, "%s: a lease is granted before the flush" % tag,
                   repr(rep))
                continue
            grants.append(g)
        wait_redis_tokens(r, "k", set(g.token for g in grants if g.sem ==
                                      "k" and g.t_release is None),
                          "%s: Redis holds the leases" % tag)
        lines_before = len(s.d.log_lines())
        if how == "FLUSHALL":
            eq(r.cmd("FLUSHALL"), "OK", "%s: FLUSHALL" % tag)
        else:
            r.kill()
            r.restart(empty=True)
            note("%s: Redis killed and started again empty" % tag)
        t_flush = now()
        bad = standby_stays_standby(s, 3 * LEASE_MS / 1000.0 + 1)
        ok(bad is None, "%s: the standby does not claim the emptied data "
           "set" % tag, "ROLE on the standby %.3f s after: %r; its log:\n%s"
           % (now() - t_flush, bad, log_tail(s.log_text(), 8)))
        ro = role_at(o.port)
        ok(ro is not None and ro["role"] == "owner", "%s: the owner is "
           "still the owner" % tag, repr(ro))
        added = len(s.d.log_lines()) - lines_before
        ok(added <= 12, "%s: the standby logged %d lines meanwhile "
           "(rate-limited)" % (tag, added), log_tail(s.log_text(), 15))
        if ro is not None and ro["role"] == "owner":
            try:
                held = held_map(o.port, ["k"])
                miss = missing_leases(grants, held, now())
                ok(not miss, "%s: HOLDERS on the owner lists every lease" %
                   tag, repr(miss))
            except (OSError, ConnClosed, ReplyTimeout, AssertionError) as e:
                ok(False, "%s: HOLDERS on the owner" % tag, repr(e))
            want = sorted(set(g.token for g in grants if g.sem == "k" and
                              g.t_release is None))
            ok(wait_until(lambda: redis_tokens(r, "k") == want, LIMIT),
               "%s: the owner rewrote Redis from memory" % tag,
               "Redis has %s, expected %s" % (attempt(redis_tokens, r, "k"),
                                              want))
            g, rep = acquire(Session(o.port), "TRY k LEASE 60000", 5,
                             label=tag + " after")
            ok(g is not None, "%s: the owner grants after the %s" %
               (tag, how), repr(rep))
            if g:
                grants.append(g)
        # the owner dies: its standby takes over with every lease
        o.kill9()
        t_kill = now()
        ro, t_take = wait_takeover(s)
        ok(t_take is not None, "%s: the standby takes over after kill -9 of "
           "the owner (%s)" % (tag, "%.3f s" % (t_take - t_kill) if t_take
                               else "never"), log_tail(s.log_text(), 10))
        if t_take is not None:
            held = held_map(s.port, ["k"])
            miss = missing_leases(grants, held, now())
            ok(not miss, "%s: the new owner lists every lease" % tag,
               "missing %r; listed %r" % (miss, held))
            g, rep = acquire(Session(s.port), "TRY k LEASE 60000", 5,
                             label=tag + " new owner")
            ok(g is not None, "%s: the new owner grants" % tag, repr(rep))
            if g:
                grants.append(g)
        o.start()           # back, as a standby
        check_tokens(ok, grants, "%s: " % tag)


def test_flushall_with_leases():
    with start_redis() as r:
        pair = start_pair(r, ["--semaphore", "k", "100"], LEASE, GRACE)
        grants = []
        t0 = now()
        emptied_rounds(r, pair, "FLUSHALL", max(2, ROUNDS - 2), grants, t0)
        check_overgrant(ok, grants, {"k": 100}, GRACE_S, t0, "FLUSHALL: ")
        for p in pair:
            p.stop()


def test_redis_back_empty_with_leases():
    with start_redis(appendonly=False) as r:
        pair = start_pair(r, ["--semaphore", "k", "100"], LEASE, GRACE)
        grants = []
        t0 = now()
        emptied_rounds(r, pair, "empty restart", 2, grants, t0)
        for p in pair:
            p.stop()


# --------------------------------------------------------------------------
# 3. One-way partition: writes reach Redis, replies are lost
# --------------------------------------------------------------------------

# A longer owner-lease here, so that a batch times out (redis-timeout 1 s)
# while the owner still acts as owner: its TRY is answered ERR UNAVAILABLE.
OW_LEASE_S = 3.0
OW_LIMIT = 3 * OW_LEASE_S + 3.0


def test_one_way_partition():
    with start_redis() as r, Proxy(r.port) as px:
        pair = start_pair(r, ["--semaphore", "s", "2", "--semaphore", "x",
                              "5"], "%dms" % (OW_LEASE_S * 1000), GRACE,
                          owner_redis=px)
        o, s = pair
        grants = []
        t0 = now()
        c1 = Session(o.port, label="bound holder")
        g1, rep = acquire(c1, "ACQUIRE s", 5, label="bound")
        ok(g1 is not None, "a client of the owner holds a bound permit of s",
           repr(rep))
        c2 = Session(o.port, label="lease holder")
        g2, rep = acquire(c2, "TRY s LEASE 30000", 5, label="lease")
        ok(g2 is not None, "another holds a lease of s", repr(rep))
        grants += [g for g in (g1, g2) if g]
        d = Session(o.port, label="TRY during the cut")
        px.cut_replies()
        t_cut = now()
        note("proxy: replies from Redis to the owner are dropped from now")
        line = "TRY x 1 LEASE 30000"
        t_d = d.send_only(line)
        rd = d.reply_in_thread(t_d, line, OW_LIMIT + 5)
        t_closed = None
        t_take = None
        deadline = t_cut + OW_LIMIT + 2
        while now() < deadline and (t_closed is None or t_take is None):
            if t_closed is None and c1.watch(0.01):
                t_closed = c1.t_closed
            elif t_closed is None and c1.ready(0):
                c1.conn.line(0.1)      # unsolicited: keep watching
            if t_take is None:
                ro = role_at(s.port, 1.0)
                if ro is not None and ro["role"] == "owner":
                    t_take = now()
            if t_closed is None and not c1.closed():
                c1.req("PING", 0.5)    # a careful holder pings
        rel = (lambda t: "%.3f s" % (t - t_cut) if t is not None else
               "never")
        note("after the cut: the owner closed its client at %s, the "
             "standby took over at %s; %d bytes of replies dropped" %
             (rel(t_closed), rel(t_take), px.dropped))
        ok(t_closed is not None and t_closed - t_cut <= OW_LEASE_S +
           2.0, "the owner closes its clients' connections at its deadline "
           "(%s)" % rel(t_closed), log_tail(o.log_text(), 10))
        ok(t_take is not None and t_take - t_cut <= OW_LIMIT, "the standby "
           "takes over within %.0f s of the cut (%s)" % (OW_LIMIT, rel(t_take)),
           log_tail(s.log_text(), 10))
        rd["thread"].join(OW_LIMIT + 6)
        rep_d = rd.get("reply")
        note("the TRY sent during the cut was answered %r" % (rep_d,))
        m = re.fullmatch(r"OK ([0-9]+)", rep_d or "")
        if m:
                grants.append(Grant("x", 1, int(m.group(1)), "lease", t_d,
                                rd["t"], d, 30000, label="during cut"))
        in_redis = sorted(set(redis_tokens(r, "x")) -
                          set(g.token for g in grants if g.sem == "x"))
        note("grants of x in Redis that no client was told of: %r" %
             in_redis)
        if t_take is None:
            px.heal()
            note("healed the proxy: checking on whichever daemon owns now")
        owner, _ = roles(pair)
        ok(owner is not None, "one of the two owns the data set")
        if owner is not None:
            e = Session(owner.port, label="new owner's client")
            g3, rep = acquire(e, "ACQUIRE s TIMEOUT %d" %
                              int((GRACE_S + 2) * 1000), 10, label="after")
            if g3:
                grants.append(g3)
            held = held_map(owner.port, ["s", "x"])
            miss = missing_leases(grants, held, now())
            ok(not miss, "the owner lists every lease clients were granted",
               "missing %r; listed %r" % (miss, held))
            told = set(g.token for g in grants if g.sem == "x")
            extra = sorted(held["x"] - told)
            if rep_d and rep_d.startswith("ERR UNAVAILABLE") and \
                    "nothing was granted" in rep_d:
                ok(not extra and not in_redis, "a TRY answered %r is not "
                   "held afterwards" % rep_d, "HOLDERS x on the owner lists "
                   "%r; Redis held %r" % (extra, in_redis))
            elif rep_d and rep_d.startswith("ERR UNAVAILABLE"):
                ok("unknown" in rep_d, "an ERR UNAVAILABLE of a TRY that "
                   "may be held says the outcome is unknown", repr(rep_d))
            elif not (rep_d or "").startswith("OK"):
                note("no answer to the TRY (connection closed): its outcome "
                     "is unknown to the client, HOLDERS x lists %r" % extra)
            else:
                ok(not extra, "the owner holds no grant of x that no "
                   "client was told of", repr(extra))
            for g in grants:
                if g.kind == "lease" and g.t_release is None:
                    release(e, g)
            if g3:
                release(e, g3)
            e.close()
        for sess in (c1, c2, d):
            sess.close()
        check_overgrant(ok, grants, {"s": 2, "x": 5}, GRACE_S, t0,
                        "one-way partition: ")
        check_tokens(ok, grants, "one-way partition: ")
        px.heal()
        if t_take is not None:
            ro, t = wait_role(o.port, "standby", OW_LIMIT + 5)
            ok(t is not None, "the old owner is a standby once it hears "
               "Redis again", repr(ro))
        ok(o.d.alive() and s.d.alive(), "both daemons are alive")
        for p in pair:
            p.stop()


TESTS = [test_paused_owner_grant_in_flight, test_busy_owner_grant_in_flight,
         test_flushall_with_leases, test_redis_back_empty_with_leases,
         test_one_way_partition]
# SAFETY_ONLY=name,name runs only those (while working on one of them)
ONLY = [x for x in os.environ.get("SAFETY_ONLY", "").split(",") if x]
run(*[t for t in TESTS if not ONLY or t.__name__ in ONLY], time_limit=600)
