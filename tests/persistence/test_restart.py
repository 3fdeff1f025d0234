#!/usr/bin/env python3
"""Persistence across kill -9 (sync mode): acknowledged grants come back
with their tokens, n and kind; connection-bound grants are unowned for
reclaim-grace, can be ATTACHed back, and are released when nobody does;
leases resume with their remaining time but never less than the grace;
semaphores (config, CREATE, RESIZE, DELETE) survive; tokens never go
back. Every semd is started against a private redis-server."""
import os
import re
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403

GRACE_MS = 2000


def same_grants(got, want, desc):
    """got, want: {token: holders row}; compares n and kind."""
    g = {t: (h["n"], h["kind"]) for t, h in got.items()}
    w = {t: (h["n"], h["kind"]) for t, h in want.items()}
    return eq(g, w, desc)


def test_grants_survive_kill9():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "s", "5",
                             grace="%dms" % GRACE_MS)
        a, b, c = p.connect(), p.connect(), p.connect()
        ta = expect_token(a, "ACQUIRE s 2")
        tb = expect_token(b, "ACQUIRE s LEASE 60000")
        tc = expect_token(c, "TRY s")
        before = holders(a, "s")
        eq(sorted(before), sorted([ta, tb, tc]), "HOLDERS before the kill")
        # sync: every OK <token> was answered after Redis acknowledged it
        st = redis_state(r)
        eq({t: (g.get("n"), g.get("kind")) for t, g in
            st["sems"].get("s", {"grants": {}})["grants"].items()},
           {ta: (2, "conn"), tb: (1, "lease"), tc: (1, "conn")},
           "Redis has every acknowledged grant at once (sync)")
        ok(st["tokens"] is not None and st["tokens"] >= max(ta, tb, tc),
           "semd:tokens >= every token issued", repr(st["tokens"]))
        for t in (ta, tc):
            eq(st["sems"]["s"]["grants"][t].get("deadline_ms"), 0,
               "bound grant %d: deadline_ms=0 in Redis" % t)
        dl = st["sems"]["s"]["grants"][tb].get("deadline_ms")
        now_ms = int(time.time() * 1000)
        ok(isinstance(dl, int) and now_ms < dl <= now_ms + 60000 + 1000,
           "lease: deadline_ms is epoch ms about 60 s ahead",
           "deadline_ms=%r now=%d" % (dl, now_ms))

        p.restart()
        loaded = loaded_line(p.log_text())
        ok(loaded is not None and loaded["sems"] >= 1 and
           loaded["grants"] == 3 and loaded["unowned"] == 2,
           "log: 'loaded S semaphores, 3 grants (2 unowned) in T ms'",
           "parsed %r from the log" % (loaded,))
        x = p.connect()
        after = holders(x, "s")
        same_grants(after, before, "after kill -9 and restart: HOLDERS has "
                    "the same tokens, n and kind")
        for t in (ta, tc):
            h = after.get(t, {})
            eq(h.get("owner"), "-", "bound grant %d is unowned" % t)
            ttl = h.get("ttl_ms", "")
            ok(ttl.isdigit() and int(ttl) <= GRACE_MS,
               "unowned grant %d: ttl_ms is its remaining grace (<= %d)"
               % (t, GRACE_MS), repr(h))
        eq(x.info("s")["used"], "4", "INFO used=4 after the restart")
        tn = expect_token(x, "ACQUIRE s LEASE 60000")
        ok(tn > max(ta, tb, tc), "a new token is above every token issued "
           "before the restart", "new %d, old %r" % (tn, (ta, tb, tc)))
        # nobody attaches: the bound grants go when the grace ends
        ok(wait_until(lambda: x.info("s")["used"] == "2", 15),
           "the unattached bound grants are released after reclaim-grace",
           repr(holders(x, "s")))
        eq(sorted(holders(x, "s")), sorted([tb, tn]),
           "the lease and the new grant stay")
        expect_err(x, "ATTACH s %d" % ta, "NOTHELD",
                   "ATTACH after the grace -> ERR NOTHELD")
        wait_redis_tokens(r, "s", [tb, tn], "the released grants are gone "
                          "from Redis too")
        p.stop()


def test_attach_within_grace():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "s", "3",
                             "--semaphore", "me", "1", grace="4s")
        a = p.connect()
        t1 = expect_token(a, "ACQUIRE s 2")
        t2 = expect_token(a, "ACQUIRE s")
        p.restart()
        x, y = p.connect(), p.connect()
        expect(x, "ATTACH s %d" % t1, "OK",
               "ATTACH s <token> from a new connection within the grace")
        # learn x's connection id from a grant of its own
        expect_token(x, "ACQUIRE me")
        xid = x.listing("HOLDERS me")[0].get("owner")
        hs = holders(x, "s")
        h1 = hs.get(t1, {})
        ok(h1.get("owner") == xid and h1.get("kind") == "conn" and
           h1.get("n") == "2",
           "HOLDERS: the attached grant has owner=<x's id> kind=conn n=2",
           "x is %r; %r" % (xid, h1))
        eq(hs.get(t2, {}).get("owner"), "-",
           "the other grant is still unowned")
        got = y.cmd("ATTACH s %d" % t1)
        ok(got.startswith("ERR "), "ATTACH of a grant x has taken back, from "
           "another connection -> ERR", repr(got))
        eq(holders(y, "s").get(t1, {}).get("owner"), xid,
           "... and x still owns it")
        ok(wait_until(lambda: x.info("s")["used"] == "2", 15),
           "after the grace the unattached grant is released, the attached "
           "one stays", repr(holders(x, "s")))
        eq(sorted(holders(x, "s")), [t1], "HOLDERS lists only the attached "
           "grant")
        expect_err(y, "ATTACH s %d" % t2, "NOTHELD",
                   "ATTACH of the released grant -> ERR NOTHELD")
        expect_err(y, "RELEASE s %d" % t1, "NOTOWNER",
                   "RELEASE of x's attached grant from y -> ERR NOTOWNER")
        x.close()
        ok(wait_until(lambda: y.info("s")["used"] == "0", 10),
           "closing the attaching connection releases the grant",
           repr(holders(y, "s")))
        wait_redis_tokens(r, "s", [], "and Redis no longer has grants of s")
        p.stop()


def watch_lease(c, sem, token, limit):
    """Poll CHECK until the grant is gone; returns the monotonic time of
    the first NOTHELD (None if still held at limit)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        t = time.monotonic()
        r = c.cmd("CHECK %s %d" % (sem, token))
        if r.startswith("ERR NOTHELD"):
            return t
        time.sleep(0.05)
    return None


def lease_ttl(c, sem, token):
    r = c.cmd("CHECK %s %d" % (sem, token))
    m = re.fullmatch(r"OK n=\d+ kind=lease ttl_ms=(\d+)", r)
    return int(m.group(1)) if m else r


def test_leases_resume():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "l", "3",
                             grace="%dms" % GRACE_MS)
        a = p.connect()
        sent_long = time.monotonic()
        tlong = expect_token(a, "ACQUIRE l LEASE 6000")
        sent_short = time.monotonic()
        tshort = expect_token(a, "ACQUIRE l LEASE 2500")
        time.sleep(1.5)
        r_long = lease_ttl(a, "l", tlong)
        r_short = lease_ttl(a, "l", tshort)
        ok(isinstance(r_long, int) and isinstance(r_short, int),
           "CHECK shows both leases before the kill",
           repr((r_long, r_short)))
        t_kill = time.monotonic()
        p.restart()
        x = p.connect()
        since = (time.monotonic() - t_kill) * 1000
        got_long = lease_ttl(x, "l", tlong)
        got_short = lease_ttl(x, "l", tshort)
        ok(isinstance(got_long, int) and got_long <= r_long + 300 and
           got_long >= max(r_long, GRACE_MS) - since - 300,
           "the 6 s lease resumes with its remaining time (no more than "
           "before the kill, not cut short)",
           "before %r, after %r, %.0f ms since the kill" %
           (r_long, got_long, since))
        ok(isinstance(got_short, int) and
           max(r_short, GRACE_MS) - since - 300 <= got_short <=
           max(r_short, GRACE_MS) + 300,
           "the lease with less than reclaim-grace left gets at least the "
           "grace", "before %r, after %r, %.0f ms since the kill" %
           (r_short, got_short, since))
        eq(holders(x, "l").get(tlong, {}).get("kind"), "lease",
           "HOLDERS: still kind=lease")
        gone_short = watch_lease(x, "l", tshort, 15)
        gone_long = watch_lease(x, "l", tlong, 15)
        ok(gone_short is not None and
           gone_short >= max(sent_short + 2.5, t_kill + GRACE_MS / 1000.0)
           - 0.2, "the short lease ends, not before max(its end, the "
           "restart + grace)", "gone %.2f s after it was sent" %
           ((gone_short or 0) - sent_short))
        ok(gone_long is not None and gone_long >= sent_long + 6.0 - 0.2,
           "the long lease ends, not before its 6 s",
           "gone %.2f s after it was sent" % ((gone_long or 0) - sent_long))
        eq(x.info("l")["used"], "0", "INFO used=0 once both ended")
        wait_redis_tokens(r, "l", [], "the ended leases are gone from Redis")
        p.stop()


def test_semaphores_survive():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "cfg", "3")
        a = p.connect()
        expect(a, "CREATE dyn 4", "OK")
        expect(a, "RESIZE dyn 7", "OK")
        expect(a, "CREATE gone 2", "OK")
        expect(a, "DELETE gone", "OK")
        expect(a, "RESIZE cfg 5", "OK")
        ok(wait_until(lambda: {n: v["capacity"] for n, v in
                               redis_state(r)["sems"].items()} ==
                      {"cfg": 5, "dyn": 7}, 10),
           "Redis has cfg=5 and dyn=7 and not the deleted one",
           repr(redis_state(r)))
        eq(r.cmd("EXISTS", "semd:{gone}:sem"), 0,
           "the deleted semaphore's hash is gone from Redis")
        p.restart()
        x = p.connect()
        caps = {row["name"]: row["capacity"] for row in x.listing("LIST")}
        eq(caps, {"cfg": "3", "dyn": "7"}, "after kill -9: LIST has the "
           "CREATEd semaphore with its RESIZEd capacity, and the config one "
           "back at the file's capacity (README: the file is the authority "
           "for the semaphores it names)")
        ok([ln for ln in p.d.log_lines() if "cfg" in ln and "capacity" in ln],
           "semd logs that the file's capacity replaces the stored one",
           log_tail(p.log_text()))
        ok(wait_until(lambda: redis_state(r)["sems"].get("cfg", {}).get(
            "capacity") == 3, 10), "and writes the file's capacity to Redis",
           attempt(redis_state, r))
        expect_err(x, "INFO gone", "NOSEM", "the DELETEd one stays deleted")
        tok = expect_token(x, "ACQUIRE dyn 7")
        eq(x.info("dyn")["used"], "7", "the restored capacity is usable")
        expect(x, "RELEASE dyn %d" % tok, "OK")
        wait_redis_tokens(r, "dyn", [], "the RELEASE is written to Redis")
        p.args += ["--semaphore", "extra", "4"]
        p.restart()
        y = p.connect()
        caps = {row["name"]: row["capacity"] for row in y.listing("LIST")}
        eq(caps, {"cfg": "3", "dyn": "7", "extra": "4"}, "a restart with "
           "one more --semaphore creates it, the others as they were")
        ok(wait_until(lambda: redis_state(r)["sems"].get("extra", {}).get(
            "capacity") == 4, 10), "and writes it to Redis",
           repr(redis_state(r)))
        p.stop()


def test_refresh_and_revoke_persisted():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "s", "3", grace="5s")
        a, b = p.connect(), p.connect()
        tl = expect_token(a, "ACQUIRE s LEASE 5000")
        tb = expect_token(b, "ACQUIRE s")
        tk = expect_token(b, "ACQUIRE s")
        expect(a, "REFRESH s %d 60000" % tl, "OK 60000")
        now_ms = int(time.time() * 1000)
        dl = redis_state(r)["sems"]["s"]["grants"].get(tl, {}).get(
            "deadline_ms")
        ok(isinstance(dl, int) and now_ms + 55000 <= dl <= now_ms + 61000,
           "REFRESH is answered after its write: Redis has the new deadline "
           "at once", "deadline_ms=%r now=%d" % (dl, now_ms))
        expect(a, "REVOKE s %d" % tb, "OK", "REVOKE of b's bound grant")
        wait_redis_tokens(r, "s", [tl, tk], "the revoked grant is removed "
                          "from Redis")
        p.restart()
        x = p.connect()
        hs = holders(x, "s")
        eq(sorted(hs), sorted([tl, tk]), "after kill -9: the revoked grant "
           "stays gone, the others are back")
        ttl = lease_ttl(x, "s", tl)
        ok(isinstance(ttl, int) and ttl > 50000, "the refreshed lease "
           "resumes with about 60 s, not its first 5 s", repr(ttl))
        p.stop()


def test_tokens_never_go_back():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "t", "2")
        seen = []
        for rnd in range(4):
            c = p.connect()
            for req in ("ACQUIRE t", "TRY t LEASE 60000"):
                tok = expect_token(c, req, "round %d: %s -> OK <token>" %
                                   (rnd, req))
                ok(not seen or tok > max(seen), "round %d: token %d is "
                   "above every earlier one" % (rnd, tok), repr(seen[-4:]))
                seen.append(tok)
            expect(c, "RELEASE t %d" % seen[-2], "OK")
            expect(c, "RELEASE t %d" % seen[-1], "OK")
            # RELEASE is answered at once and written with the next batch:
            # let it land before the kill, or the grants come back
            wait_redis_tokens(r, "t", [], "round %d: the releases are "
                              "written to Redis" % rnd)
            tk = r.cmd("GET", "semd:tokens")
            ok(tk is not None and int(tk) >= max(seen),
               "round %d: semd:tokens >= every token issued" % rnd, repr(tk))
            if rnd < 3:
                p.restart()
        eq(len(set(seen)), len(seen), "no token was issued twice over %d "
           "restarts" % p.restarts)
        p.stop()


def test_holders_oldest_first_after_load():
    """A Redis hash has no order (a hashtable encoding, forced here, lists
    fields in any order): after a restart HOLDERS must still be oldest
    first, as before it."""
    with start_redis(extra=("--hash-max-listpack-entries", "0")) as r:
        p = start_semd_redis(r, "--semaphore", "s", "40", grace="4s")
        c = p.connect()
        toks = [expect_token(c, "TRY s LEASE 120000") for _ in range(40)]
        eq([int(h["token"]) for h in c.listing("HOLDERS s")], toks,
           "HOLDERS oldest first before the restart")
        p.restart()
        x = p.connect()
        eq([int(h["token"]) for h in x.listing("HOLDERS s")], toks,
           "HOLDERS oldest first after the load (grants in token order)")


run(test_grants_survive_kill9, test_attach_within_grace, test_leases_resume,
    test_semaphores_survive, test_refresh_and_revoke_persisted,
    test_tokens_never_go_back, test_holders_oldest_first_after_load,
    time_limit=200)
