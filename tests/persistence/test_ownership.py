#!/usr/bin/env python3
"""Ownership of a Redis data set (issue 7): one owner at a time.

A second semd with `standby no` refuses to start and names the owner, its
epoch and the data set; a standby answers ERR STANDBY with the owner's
address to everything but PING, AUTH, QUIT, ROLE and STATS; ROLE on an
owner, a standby and a daemon without persistence; kill -9 of the owner
and the standby serves within owner-lease + 1 s with every acknowledged
grant (leases as leases, bound permits unowned and ATTACH-able), tokens
above every token issued, and a strictly larger epoch; the old owner
restarted exits (standby no) or stays a standby (standby yes) and never
serves; `standby yes` needs sync persistence; a foreign owner key blocks
a start. Every semd runs against a private redis-server."""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403

LEASE_MS = 1500
LEASE = "%dms" % LEASE_MS
# takeover bound of the contract (owner-lease + 1 s) plus 1 s of slack for
# the sanitizer build on a shared machine
TAKEOVER_LIMIT = LEASE_MS / 1000.0 + 1.0 + 1.0
SEMS = ["--semaphore", "s", "3", "--semaphore", "big", "1000"]


def owner_args(standby=False):
    return SEMS + ownership_args(LEASE, standby)


def dataset(r, db=0, prefix=PREFIX):
    """A regex of the data set as the log names it (the prefix may be
    quoted: it may be empty)."""
    return r"redis %s db %d prefix (%s|'%s')(\s|$)" % (
        re.escape(r.addr()), db, re.escape(prefix), re.escape(prefix))


def refusal_lines(text):
    """The error lines of a refused start ('... is owned by ...'); an info
    line may come first while semd waits one owner-lease to see whether
    the owner is alive (it may be its own crashed predecessor)."""
    return [ln for ln in text.splitlines()
            if "is owned by" in ln and " error: " in ln]


def check_refusal(status, text, owner_addr, epoch, ds, what):
    eq(status, 1, "%s: exits with status 1" % what)
    lines = refusal_lines(text)
    ok(len(lines) == 1, "%s: logs one error line 'is owned by ...'" % what,
       log_tail(text))
    ln = lines[0] if lines else ""
    ok("is owned by %s (epoch %d)" % (owner_addr, epoch) in ln,
       "%s: the line names the owner %s and epoch %d" %
       (what, owner_addr, epoch), repr(ln))
    ok(re.search(ds, ln), "%s: the line names the data set /%s/" %
       (what, ds), repr(ln))


def test_second_owner_refused():
    with start_redis() as r:
        p1 = start_semd_redis(r, *owner_args())
        a = p1.connect()
        ro = role_of(a)
        eq(ro["role"], "owner", "the first semd is the owner")
        eq(ro["owner"], "127.0.0.1:%d" % p1.port,
           "ROLE owner= is its advertised address (first bind, port)")
        ok(ro["epoch"] >= 1, "its epoch is at least 1", repr(ro))
        k = owner_key(r)
        ok(k is not None and k[0] == ro["epoch"] and
           k[-1] == "127.0.0.1:%d" % p1.port,
           "Redis 'semd:owner' is 'EPOCH INSTANCEID ADDR' of the owner",
           repr(k))
        pttl = r.cmd("PTTL", PREFIX + "owner")
        ok(isinstance(pttl, int) and 0 < pttl <= LEASE_MS,
           "'semd:owner' expires within owner-lease", repr(pttl))
        eq(r.cmd("GET", PREFIX + "epoch"), str(ro["epoch"]),
           "Redis 'semd:epoch' is the owner's epoch")
        t1 = expect_token(a, "ACQUIRE s LEASE 60000")

        status, text = semd_must_exit("--redis", r.addr(),
                                      "--reclaim-grace", "2s", *owner_args())
        check_refusal(status, text, "127.0.0.1:%d" % p1.port, ro["epoch"],
                      dataset(r), "a second semd (standby no)")
        # with a logfile: the reason reaches stderr too ([emerg])
        logf = os.path.join(tempfile.mkdtemp(prefix="semdtest."), "b.log")
        b = start_semd("--redis", r.addr(), "--reclaim-grace", "2s",
                       "--logfile", logf, *owner_args(), wait_ready=False)
        b.check_exit = False
        try:
            b.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        b.stop()
        with open(b.stderr_path) as f:
            err = f.read()
        ok(b.proc.returncode == 1 and "semd: [emerg] " in err and
           "a second owner could over-grant" in err,
           "a second owner with a logfile: exit 1, the reason on stderr "
           "too, not only in the log", (b.proc.returncode, err[-400:]))
        # with a config file too, as an operator would start it
        status, text = semd_must_exit("--redis", r.addr(), "--port", "0",
                                      *SEMS)
        eq(status, 1, "a second semd with the default owner-lease and "
           "standby also exits 1")

        eq(role_of(a), ro, "the first keeps its role and epoch")
        t2 = expect_token(a, "TRY s LEASE 60000", "the first still grants")
        ok(t2 > t1, "its tokens go on", "%d then %d" % (t1, t2))
        eq(sorted(holders(a, "s")), sorted([t1, t2]),
           "nothing the second did changed the first's grants")
        eq(redis_tokens(r, "s"), sorted([t1, t2]),
           "nor the grants in Redis")
        p1.stop()


STANDBY_REFUSED = [
    "ACQUIRE s", "ACQUIRE s 1 TIMEOUT 100 LEASE 1000", "TRY s",
    "TRY big LEASE 5000", "CREATE new 2", "RESIZE s 5", "DELETE s",
    "INFO s", "LIST", "HOLDERS s", "WAITERS s", "RELEASE s 1",
    "REFRESH s 1 1000", "ATTACH s 1", "CHECK s 1", "REVOKE s 1",
]


def test_standby_answers():
    with start_redis() as r:
        p1 = start_semd_redis(r, *owner_args(), "--requirepass", "pw")
        a = p1.connect()
        expect(a, "AUTH pw", "OK")
        t1 = expect_token(a, "ACQUIRE s")
        ro = role_of(a)
        owner = "127.0.0.1:%d" % p1.port
        p2 = start_semd_redis(r, *owner_args(standby=True),
                              "--requirepass", "pw")
        ok("ready to accept connections as a standby (owner %s, epoch %d)"
           % (owner, ro["epoch"]) in p2.log_text(),
           "the standby logs 'ready to accept connections as a standby "
           "(owner %s, epoch %d)'" % (owner, ro["epoch"]),
           log_tail(p2.log_text()))
        b = p2.connect()
        expect(b, "PING", "OK PONG", "standby: PING -> OK PONG")
        expect_err(b, "ROLE", "AUTH", "standby: ROLE before AUTH -> ERR AUTH")
        expect_err(b, "AUTH nope", "AUTH", "standby: a wrong AUTH -> ERR AUTH")
        expect(b, "AUTH pw", "OK", "standby: AUTH -> OK")
        rs = role_of(b)
        eq(rs, {"role": "standby", "epoch": ro["epoch"], "owner": owner},
           "standby: ROLE -> role=standby, the owner's epoch and address")
        for who, conn in (("owner", a), ("standby", b)):
            eq(role_times(conn), (LEASE_MS, 2000),
               "%s: ROLE shows owner_lease_ms=%d reclaim_grace_ms=2000 "
               "(what a client needs to bound a bound permit)" %
               (who, LEASE_MS))
            st = stats_of(conn)
            eq((st.get("owner_lease_ms"), st.get("reclaim_grace_ms")),
               (str(LEASE_MS), "2000"),
               "%s: STATS shows owner_lease_ms and reclaim_grace_ms" % who)
        for req in STANDBY_REFUSED:
            got = b.cmd(req)
            eq(standby_reply(got), (owner, ro["epoch"]),
               "standby: %s -> ERR STANDBY owner=%s epoch=%d ..." %
               (show(req), owner, ro["epoch"]))
        st = stats_of(b)
        ok(st.get("role") == "standby" and st.get("owner") == owner and
           st.get("epoch") == str(ro["epoch"]),
           "standby: STATS has role=standby epoch= owner=",
           repr({k: st.get(k) for k in ("role", "epoch", "owner")}))
        st = stats_of(a)
        ok(st.get("role") == "owner" and st.get("owner") == owner and
           st.get("epoch") == str(ro["epoch"]),
           "owner: STATS has role=owner epoch= owner=",
           repr({k: st.get(k) for k in ("role", "epoch", "owner")}))
        # an unauthenticated standby connection: auth comes first
        u = p2.connect()
        expect_err(u, "ACQUIRE s", "AUTH",
                   "standby, before AUTH: ACQUIRE -> ERR AUTH")
        expect(u, "QUIT", "OK", "standby: QUIT -> OK")
        ok(u.expect_closed(), "... and the standby closes the connection")
        expect(b, "PING", "OK PONG", "the standby connection still works")

        # nothing the standby was asked changed anything
        eq(sorted(holders(a, "s")), [t1], "the owner's grants are unchanged")
        eq(a.info("s")["capacity"], "3", "RESIZE on the standby did nothing")
        eq(r.cmd("EXISTS", PREFIX + "{new}:sem"), 0,
           "CREATE on the standby wrote nothing to Redis")
        eq(role_of(b), rs, "the standby stays a standby while the owner "
           "lives")
        p2.stop()
        p1.stop()


def role_times(c):
    """(owner_lease_ms, reclaim_grace_ms) of ROLE's reply, as ints."""
    got = c.cmd("ROLE")
    m = re.fullmatch(r"OK role=\S+ epoch=[0-9]+ owner=\S+ "
                     r"owner_lease_ms=([0-9]+) reclaim_grace_ms=([0-9]+)",
                     got)
    if not m:
        return got
    return (int(m.group(1)), int(m.group(2)))


def test_role_single():
    with start_semd("--semaphore", "s", "1") as d:
        c = d.connect()
        expect(c, "ROLE", "OK role=single epoch=0 owner=- "
               "owner_lease_ms=3000 reclaim_grace_ms=10000",
               "no persistence: ROLE -> OK role=single epoch=0 owner=- "
               "and the default owner-lease and reclaim-grace")
    with start_semd("--semaphore", "s", "1", "--reclaim-grace", "2.5s",
                    "--owner-lease", "1s") as d:
        c = d.connect()
        eq(role_times(c), (1000, 2500), "ROLE shows --owner-lease 1s and "
           "--reclaim-grace 2.5s in milliseconds")
        st = stats_of(c)
        ok(st.get("role") == "single" and st.get("epoch") == "0" and
           st.get("owner") == "-", "STATS: role=single epoch=0 owner=-",
           repr({k: st.get(k) for k in ("role", "epoch", "owner")}))
        expect_token(c, "TRY s", "single: grants as before")


def test_takeover_after_kill9():
    with start_redis() as r:
        p1 = start_semd_redis(r, *owner_args(), grace="6s")
        a, b = p1.connect(), p1.connect()
        e1 = role_of(a)["epoch"]
        tb = expect_token(a, "ACQUIRE s 2")            # bound, n=2
        tl = expect_token(b, "TRY s LEASE 60000")      # a lease
        tk = expect_token(b, "ACQUIRE big 7")          # bound, other sem
        before_s = holders(a, "s")
        issued = max(tb, tl, tk)
        p2 = start_semd_redis(r, *owner_args(standby=True), grace="6s")
        eq(role_at(p2.port), {"role": "standby", "epoch": e1,
                              "owner": "127.0.0.1:%d" % p1.port},
           "before the kill the second is a standby of epoch %d" % e1)

        t_kill = time.monotonic()
        p1.kill9()
        tok, t_grant, last = poll_grant(p2.port, "TRY big LEASE 60000",
                                        timeout=TAKEOVER_LIMIT + 5)
        took = (t_grant - t_kill) if t_grant else None
        note("takeover: first grant by the standby %s s after the kill "
             "(owner-lease %.1f s)" % ("%.3f" % took if took else "never",
                                       LEASE_MS / 1000.0))
        ok(tok is not None, "the standby grants after the owner's kill -9",
           "last reply %r; log:\n%s" % (last, log_tail(p2.log_text())))
        ok(took is not None and took <= TAKEOVER_LIMIT,
           "... within owner-lease + 1 s (+1 s slack): %s s" %
           ("%.3f" % took if took else "-"))
        ok(tok is not None and tok > issued, "its first token is above every "
           "token issued before", "%r vs %d" % (tok, issued))
        c = p2.connect()
        ro = role_of(c)
        eq((ro["role"], ro["owner"]), ("owner", "127.0.0.1:%d" % p2.port),
           "ROLE on the new owner: role=owner, its own address")
        ok(ro["epoch"] > e1, "the new epoch is larger (%d > %d)" %
           (ro["epoch"], e1))
        lines = [ln for ln in p2.log_text().splitlines() if "took over" in ln]
        ok(len(lines) == 1, "the new owner logs one 'took over' line",
           log_tail(p2.log_text()))
        ln = lines[0] if lines else ""
        ok(" info: " in ln and "epoch %d" % ro["epoch"] in ln,
           "... an info line naming 'epoch %d'" % ro["epoch"], repr(ln))
        ok(re.search(r"\b3 grants?\b", ln) and
           re.search(r"\b2 unowned\b", ln),
           "... with the load figures (3 grants, 2 unowned)", repr(ln))

        after = holders(c, "s")
        eq({t: (h["n"], h["kind"]) for t, h in after.items()},
           {t: (h["n"], h["kind"]) for t, h in before_s.items()},
           "HOLDERS s on the new owner: every acknowledged grant, same n "
           "and kind")
        eq(after.get(tb, {}).get("owner"), "-",
           "the bound grant is unowned on the new owner")
        eq(after.get(tl, {}).get("kind"), "lease",
           "the lease is still a lease")
        ttl = after.get(tl, {}).get("ttl_ms", "")
        ok(ttl.isdigit() and 50000 < int(ttl) <= 60000,
           "the lease resumes with its remaining time", repr(after.get(tl)))
        hb = holders(c, "big")
        ok(tk in hb and hb[tk]["owner"] == "-" and hb[tk]["n"] == "7",
           "HOLDERS big: the bound grant of 7, unowned", repr(hb))
        x = p2.connect()
        expect(x, "ATTACH s %d" % tb, "OK",
               "ATTACH of the bound grant on the new owner")
        expect(x, "ATTACH big %d" % tk, "OK", "ATTACH of the other one")
        expect(x, "RELEASE s %d" % tb, "OK",
               "the attaching connection can RELEASE it")
        expect(c, "RELEASE s %d" % tl, "OK", "the lease can be released")
        t3 = expect_token(c, "ACQUIRE s 3 TIMEOUT 2000",
                          "the freed capacity is granted again")
        ok(t3 > tok, "tokens go on increasing", "%d after %d" % (t3, tok))
        p2.stop()


def test_epochs_and_old_owner():
    with start_redis() as r:
        pa = start_semd_redis(r, *owner_args(), grace="3s")
        e1 = role_at(pa.port)["epoch"]
        pb = start_semd_redis(r, *owner_args(standby=True), grace="3s")
        pa.kill9()
        rb, _ = wait_role(pb.port, "owner", TAKEOVER_LIMIT + 5)
        ok(rb is not None and rb["role"] == "owner",
           "after kill -9 of A, B is the owner", repr(rb))
        e2 = rb["epoch"] if rb else -1
        ok(e2 > e1, "epoch %d > %d" % (e2, e1))

        # A restarted as it was (standby no): B lives, so A exits
        status, text = semd_must_exit("--redis", r.addr(), "--reclaim-grace",
                                      "3s", "--port", str(pa.port),
                                      *owner_args())
        check_refusal(status, text, "127.0.0.1:%d" % pb.port, e2,
                      dataset(r), "the old owner restarted (standby no)")

        # A restarted as a standby: never serves while B lives
        pa.args = owner_args(standby=True)
        pa.start()
        c = pa.connect()
        served = []
        t_end = time.monotonic() + 2 * LEASE_MS / 1000.0
        while time.monotonic() < t_end:
            got = c.cmd("TRY big LEASE 1000")
            if not got.startswith("ERR STANDBY"):
                served.append(got)
            ro = role_of(c)
            if ro["role"] != "standby":
                served.append(ro)
            time.sleep(0.05)
        ok(not served, "the old owner, restarted as a standby, answered "
           "ERR STANDBY and ROLE standby for 2 owner-leases", repr(served[:5]))
        eq(role_of(c), {"role": "standby", "epoch": e2,
                        "owner": "127.0.0.1:%d" % pb.port},
           "its ROLE names B and epoch %d" % e2)
        expect_token(pb.connect(), "TRY big LEASE 1000", "B still serves")

        # and the roles swap back: kill B, A takes over with a larger epoch
        pb.kill9()
        ra, _ = wait_role(pa.port, "owner", TAKEOVER_LIMIT + 5)
        ok(ra is not None and ra["role"] == "owner",
           "after kill -9 of B, A (the standby) is the owner", repr(ra))
        e3 = ra["epoch"] if ra else -1
        ok(e3 > e2, "epoch %d > %d: epochs strictly increase across "
           "takeovers" % (e3, e2))
        k = owner_key(r)
        ok(k is not None and k[0] == e3 and k[-1] == "127.0.0.1:%d" %
           pa.port, "Redis 'semd:owner' names A and epoch %d" % e3, repr(k))
        ok(int(r.cmd("GET", PREFIX + "epoch")) == e3,
           "'semd:epoch' is %d" % e3)
        pa.stop()


def test_standby_needs_sync():
    with start_redis() as r:
        for mode in ("async", "none"):
            status, text = semd_must_exit("--redis", r.addr(),
                                          "--persistence", mode,
                                          "--standby", "yes", *SEMS)
            eq(status, 1, "standby yes with persistence %s: exits 1" % mode)
            ok("standby" in text and mode in text and "unknown" not in text
               and "listening on" not in text,
               "... saying why (a line naming standby and %s), without "
               "listening" % mode, log_tail(text))
        eq(r.cmd("KEYS", PREFIX + "*"), [],
           "the refused daemons wrote nothing to Redis")
        for bad in ("100ms", "61s", "0", "soon"):
            status, text = semd_must_exit("--redis", r.addr(),
                                          "--owner-lease", bad, *SEMS)
            ok(status == 1 and "owner-lease" in text and
               "unknown directive" not in text,
               "owner-lease %s is refused (range 500ms..60s)" % bad,
               "status %r; %s" % (status, log_tail(text)))
        status, text = semd_must_exit("--redis", r.addr(), "--standby",
                                      "maybe", *SEMS)
        ok(status == 1 and "standby" in text and
           "unknown directive" not in text, "standby maybe is refused",
           "status %r; %s" % (status, log_tail(text)))
        # the bounds themselves are accepted (the config check mode)
        for good in ("500ms", "60s", "1m"):
            status, out, err = run_semd("-t", "--redis", r.addr(),
                                        "--owner-lease", good,
                                        "--standby", "yes",
                                        "--advertise", "10.0.0.1:7313",
                                        *SEMS)
            eq(status, 0, "semd -t accepts owner-lease %s with standby yes "
               "and advertise" % good)


def test_foreign_owner_key():
    with start_redis() as r:
        other = "10.9.8.7:7313"
        r.cmd("SET", PREFIX + "epoch", "41")
        r.cmd("SET", PREFIX + "owner", "41 elsewhere-1234 " + other,
              "PX", "60000")
        status, text = semd_must_exit("--redis", r.addr(), *owner_args())
        check_refusal(status, text, other, 41, dataset(r),
                      "a foreign owner key in Redis (standby no)")
        eq(r.cmd("GET", PREFIX + "owner"), "41 elsewhere-1234 " + other,
           "the refused daemon left the foreign key alone")

        p = start_semd_redis(r, *owner_args(standby=True))
        c = p.connect()
        eq(role_of(c), {"role": "standby", "epoch": 41, "owner": other},
           "a standby names the foreign owner")
        eq(standby_reply(c.cmd("TRY s")), (other, 41),
           "and sends clients to it")
        # the foreign owner goes away: its key ends
        r.cmd("PEXPIRE", PREFIX + "owner", "200")
        ro, _ = wait_role(p.port, "owner", LEASE_MS / 1000.0 + 5)
        ok(ro is not None and ro["role"] == "owner" and ro["epoch"] > 41,
           "when the key ends, the standby takes over with an epoch above "
           "41", repr(ro))
        ok(ro is not None and r.cmd("GET", PREFIX + "epoch") ==
           str(ro["epoch"]), "'semd:epoch' is the new owner's epoch")
        expect_token(c, "TRY s", "and grants")
        p.stop()


def test_advertise():
    with start_redis() as r:
        adv = "semd-a.example:7400"
        p1 = start_semd_redis(r, *owner_args(), "--advertise", adv)
        a = p1.connect()
        ro = role_of(a)
        eq((ro["role"], ro["owner"]), ("owner", adv),
           "advertise: ROLE owner= is the advertised address")
        k = owner_key(r)
        ok(k is not None and k[-1] == adv, "'semd:owner' holds the "
           "advertised address", repr(k))
        p2 = start_semd_redis(r, *owner_args(standby=True))
        b = p2.connect()
        eq(standby_reply(b.cmd("ACQUIRE s")), (adv, ro["epoch"]),
           "a standby sends clients to the advertised address")
        status, text = semd_must_exit("--redis", r.addr(), *owner_args())
        ok(status == 1 and "is owned by %s (epoch %d)" % (adv, ro["epoch"])
           in text, "a refused start names the advertised address",
           log_tail(text))
        p2.stop()
        p1.stop()


run(test_second_owner_refused, test_standby_answers, test_role_single,
    test_takeover_after_kill9, test_epochs_and_old_owner,
    test_standby_needs_sync, test_foreign_owner_key, test_advertise,
    time_limit=90)
