#!/usr/bin/env python3
"""An owner cut off from Redis (issue 7): the owner reaches Redis through a
TCP proxy in this test, the standby directly. Pausing the proxy (nothing
forwarded either way, nothing closed) is a partition: the owner cannot
renew its ownership, so it must stop at once, close its clients'
connections and log "lost ownership" before its key can expire in Redis,
hence before the standby takes over and long before the standby releases
the unattached bound permits (reclaim-grace after it takes over). After
the proxy resumes, the old owner never serves again: it exits 1 (standby
no, another daemon took over) or stays a standby (standby yes)."""
import os
import select
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403

LEASE_MS = 1500
LEASE = "%dms" % LEASE_MS
GRACE_S = 3.0
GRACE = "%dms" % int(GRACE_S * 1000)
SEMS = ["--semaphore", "s", "2", "--semaphore", "big", "1000"]
# the owner must notice within owner-lease; the standby take over within
# owner-lease + 1 s; 2 s of slack for the sanitizer build
LIMIT = LEASE_MS / 1000.0 + 1.0 + 2.0
POLL = 0.01


def eof_now(c):
    """True if the server has closed c (EOF or reset readable now)."""
    if c.eof:
        return True
    r, _, _ = select.select([c.sock], [], [], 0)
    if r:
        try:
            data = c.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if not data:
            c.eof = True
            return True
        c.buf += data
    return False


def partition(r, px, old_standby):
    """Owner A through a proxy, standby B direct, a client of A holding a
    bound permit and a lease; pause the proxy and time what happens.
    Returns a dict of what was seen (times relative to the pause)."""
    pa = PSemd(px, SEMS + ownership_args(LEASE, old_standby), grace=GRACE)
    c = pa.connect()
    ra = role_of(c)
    eq(ra["role"], "owner", "A (through the proxy) is the owner")
    tb = expect_token(c, "ACQUIRE s", "a client of A holds a bound permit")
    d = pa.connect()
    tl = expect_token(d, "TRY s LEASE 60000", "another holds a lease")
    pb = start_semd_redis(r, *(SEMS + ownership_args(LEASE, True)),
                          grace=GRACE)
    eq(role_at(pb.port), {"role": "standby", "epoch": ra["epoch"],
                          "owner": "127.0.0.1:%d" % pa.port},
       "B (direct) is a standby of A")
    q = pb.connect()

    t0 = time.monotonic()
    px.pause()
    note("proxy paused: A is cut off from Redis")
    t_close = t_take = None
    role_b = None
    deadline = t0 + LIMIT + 3
    while time.monotonic() < deadline and (t_close is None or
                                           t_take is None):
        if t_close is None and eof_now(c):
            t_close = time.monotonic()
        if t_take is None:
            try:
                role_b = role_of(q, 2)
                if role_b["role"] == "owner":
                    t_take = time.monotonic()
            except (OSError, ConnClosed, ReplyTimeout):
                q = pb.connect()
        time.sleep(POLL)
    rel = (lambda t: "%.3f s" % (t - t0) if t is not None else "never")
    note("after the pause: A closed its client at %s, B took over at %s "
         "(owner-lease %.1f s, reclaim-grace %.1f s)" %
         (rel(t_close), rel(t_take), LEASE_MS / 1000.0, GRACE_S))
    ok(t_close is not None and t_close - t0 <= LIMIT,
       "A closes its client's connection when it cannot renew (%s)" %
       rel(t_close), log_tail(pa.log_text()))
    ok(eof_now(d), "A closed every client connection (the lease holder's "
       "too)")
    ok(wait_until(lambda: "lost ownership" in pa.log_text(), 5),
       "A logs 'lost ownership'", log_tail(pa.log_text()))
    ok(t_take is not None, "B takes over (%s)" % rel(t_take),
       "last ROLE %r; log:\n%s" % (role_b, log_tail(pb.log_text())))
    if t_close is not None and t_take is not None:
        ok(t_close < t_take + GRACE_S,
           "A closed its client before B's reclaim-grace ended "
           "(%.3f s before the takeover)" % (t_take - t_close))
        # the close precedes the expiry of A's key, which precedes B's
        # takeover; 50 ms for the polling of both
        ok(t_close <= t_take + 0.05,
           "A closed its client before B took over", "close at %s, "
           "takeover seen at %s" % (rel(t_close), rel(t_take)))
    e_b = role_b["epoch"] if role_b else -1
    ok(e_b > ra["epoch"], "B's epoch %d > A's %d" % (e_b, ra["epoch"]))

    return {"pa": pa, "pb": pb, "tb": tb, "tl": tl,
            "t_take": t_take, "epoch_b": e_b}


def cut_off_grants_nothing(pa):
    """A new client of A, while A is cut off, is granted nothing (A may
    answer slowly: it is busy trying to reach Redis)."""
    served = []
    for _ in range(2):
        try:
            with connect(pa.port, timeout=2) as x:
                t = time.monotonic()
                got = x.cmd("TRY big LEASE 1000", 10)
                note("A, cut off, answered TRY after %.3f s: %r" %
                     (time.monotonic() - t, got))
        except (OSError, ConnClosed, ReplyTimeout) as e:
            got = None
            note("A, cut off: %s: %s" % (type(e).__name__, e))
        if got and got.startswith("OK"):
            served.append(got)
    ok(not served, "A, cut off, grants nothing to a new connection",
       repr(served))


def never_serves(port, seconds, what):
    """Poll TRY on port for seconds; every grant is a failure."""
    served = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            c = connect(port, timeout=1)
        except OSError:
            time.sleep(0.05)
            continue
        try:
            while time.monotonic() < end:
                got = c.cmd("TRY big LEASE 1000", 2)
                if got.startswith("OK"):
                    served.append(got)
                time.sleep(0.05)
        except (OSError, ConnClosed, ReplyTimeout):
            pass
        finally:
            c.close()
    ok(not served, what, repr(served[:5]))


def test_partitioned_owner_standby_no():
    with start_redis() as r, Proxy(r.port) as px:
        s = partition(r, px, old_standby=False)
        pa, pb = s["pa"], s["pb"]
        y = pb.connect()
        h = holders(y, "s")
        ok(s["tb"] in h and h[s["tb"]]["owner"] == "-" and
           h[s["tb"]]["kind"] == "conn",
           "on B the bound permit is unowned, waiting for ATTACH", repr(h))
        ok(s["tl"] in h and h[s["tl"]]["kind"] == "lease",
           "on B the lease is held", repr(h))
        t_gone = None
        end = time.monotonic() + GRACE_S + 5
        while time.monotonic() < end:
            if s["tb"] not in holders(y, "s"):
                t_gone = time.monotonic()
                break
            time.sleep(0.02)
        if s["t_take"] is not None and t_gone is not None:
            note("B released the unattached permit %.3f s after it took "
                 "over" % (t_gone - s["t_take"]))
            ok(t_gone - s["t_take"] >= GRACE_S - 0.3,
               "B released the unattached bound permit only after "
               "reclaim-grace (%.1f s)" % GRACE_S)
        ok(t_gone is not None, "B released the unattached bound permit",
           repr(holders(y, "s")))
        ok(s["tl"] in holders(y, "s"), "the lease stays")
        cut_off_grants_nothing(pa)

        px.resume()
        note("proxy resumed")
        pa.d.check_exit = False
        try:
            pa.d.proc.wait(timeout=LIMIT + 5)
        except Exception:
            pass
        st = pa.d.proc.poll()
        ok(st == 1, "A (standby no) exits 1 once it sees another daemon "
           "took over", "status %r; log:\n%s" % (st, log_tail(pa.log_text())))
        pa.stop()
        expect_token(y, "TRY s", "B still serves")
        k = owner_key(r)
        ok(k is not None and k[0] == s["epoch_b"] and
           k[-1] == "127.0.0.1:%d" % pb.port,
           "Redis 'semd:owner' still names B", repr(k))
        pb.stop()


def test_partitioned_owner_standby_yes():
    with start_redis() as r, Proxy(r.port) as px:
        s = partition(r, px, old_standby=True)
        pa, pb = s["pa"], s["pb"]
        # the client of A follows to B and takes its permit back
        c = pb.connect()
        expect(c, "ATTACH s %d" % s["tb"], "OK", "the client of A, on B, "
               "ATTACHes its bound permit within reclaim-grace")
        cut_off_grants_nothing(pa)
        px.resume()
        note("proxy resumed")
        want = {"role": "standby", "epoch": s["epoch_b"],
                "owner": "127.0.0.1:%d" % pb.port}
        seen = []

        def names_b():
            ro = role_at(pa.port)
            seen.append(ro)
            return ro == want
        ok(wait_until(names_b, LIMIT + 5, 0.05), "A (standby yes) comes to "
           "name B and its epoch in ROLE once it reaches Redis again",
           "ROLE answers seen: %r" % sorted(set(map(repr, seen))))
        ok(all(ro is None or ro["role"] == "standby" for ro in seen),
           "... and says standby all along", repr(seen[-5:]))
        a = pa.connect()
        eq(standby_reply(a.cmd("TRY s")), ("127.0.0.1:%d" % pb.port,
                                           s["epoch_b"]),
           "A sends its clients to B")
        never_serves(pa.port, 2.0, "A never serves after the partition "
                     "heals")
        ok(pa.d.alive(), "A is still running (a standby)")
        eq(sorted(holders(c, "s")), sorted([s["tb"], s["tl"]]),
           "B holds the attached permit and the lease")
        expect(c, "RELEASE s %d" % s["tb"], "OK", "the client releases it")
        pa.stop()
        pb.stop()


run(test_partitioned_owner_standby_no, test_partitioned_owner_standby_yes,
    time_limit=90)
