#!/usr/bin/env python3
"""Every command of protocol version 1 and every error code reachable
without persistence: forms, replies, error order, tokens, listings."""
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F403


def test_readme_quick_check():
    with start_semd() as d:
        c = d.connect()
        expect(c, "CREATE jobs 2", "OK")
        tok = expect_token(c, "ACQUIRE jobs 2")
        expect(c, "INFO jobs", "OK name=jobs capacity=2 used=2 available=0 "
               "holders=1 waiters=0")
        expect(c, "TRY jobs", "TIMEOUT")
        expect(c, "RELEASE jobs %d" % tok, "OK")
        expect(c, "INFO jobs", "OK name=jobs capacity=2 used=0 available=2 "
               "holders=0 waiters=0")
        expect(c, "QUIT", "OK")
        ok(c.expect_closed(5), "QUIT: the server closes the connection")


def test_line_format():
    with start_semd() as d:
        c = d.connect()
        c.send("PING\r\n")
        eq(c.raw_line(), b"OK PONG\r\n", "a reply ends with CRLF")
        c.send("NOSUCHVERB\r\n")
        ln = c.raw_line()
        ok(ln.startswith(b"ERR PROTO ") and ln.endswith(b"\r\n"),
           "an ERR reply ends with CRLF", "got %r" % ln)
        expect(c, "CREATE a 1", "OK")
        expect(c, "CREATE b 1", "OK")
        c.send("LIST\r\n")
        raw = [c.raw_line() for _ in range(3)]
        ok(all(r.endswith(b"\r\n") for r in raw),
           "every line of a listing ends with CRLF", "got %r" % raw)
        c.send("PING\n")
        eq(c.line(), "OK PONG", "a request ended by a bare LF is served")
        for v in ("ping", "Ping", "pInG"):
            expect(c, v, "OK PONG", "verbs are case-insensitive: %s" % v)
        # Blank lines get no reply at all.
        c.send("\r\n\n   \r\n\t\r\n \t \n")
        ok(c.no_reply(0.5), "blank and all-blank lines get no reply")
        c.send("PING\r\n")
        eq(c.line(), "OK PONG", "after blank lines the next reply is PING's")
        ok(c.no_reply(0.3), "...and nothing else was queued")
        # Blanks: spaces and tabs, several of them, leading and trailing.
        expect(c, "  CREATE\t\tt1 \t 3  \t", "OK",
               "words separated by runs of spaces and tabs")
        expect(c, "INFO t1", "OK name=t1 capacity=3 used=0 available=3 "
               "holders=0 waiters=0")
        # Names are case-sensitive, keywords are not.
        expect(c, "CREATE Jobs 1", "OK")
        expect_err(c, "INFO jobs", "NOSEM", "names are case-sensitive: "
                   "INFO jobs after CREATE Jobs -> ERR NOSEM")
        expect_err(c, "INFO JOBS", "NOSEM")
        expect(c, "info Jobs", "OK name=Jobs capacity=1 used=0 available=1 "
               "holders=0 waiters=0")
        t1 = expect_token(c, "acquire t1 1 timeout 0 lease 60000",
                          "lower-case keywords: acquire ... timeout 0 "
                          "lease 60000")
        r = c.cmd("check t1 %d" % t1)
        match(r, r"OK n=1 kind=lease ttl_ms=[0-9]+", "lower-case lease "
              "keyword gives a lease")
        expect_token(c, "Try t1 Lease 60000", "mixed-case: Try t1 Lease "
                     "60000")
        expect_token(c, "ACQUIRE t1 TiMeOuT 0", "mixed-case TiMeOuT")


def test_unknown_and_malformed():
    with start_semd() as d:
        c = d.connect()
        for req in ("FOO", "PINGX", "PING PONG", "QUIT now", "LIST x",
                    "STATS x", "HELLO world", "SEM", "ACQ jobs",
                    "CREATE", "CREATE a", "CREATE a 1 1", "CREATE a 0",
                    "CREATE a -1", "CREATE a +1", "CREATE a 1x",
                    "CREATE a 0x10", "CREATE a 1.0", "CREATE a 2147483648",
                    "CREATE a 99999999999999999999999",
                    "CREATE bad!name 1", "CREATE bad,name 1",
                    "CREATE na*me 1", "CREATE " + "x" * 201 + " 1",
                    "CREATE caf\xc3\xa9 1", "CREATE a\x00b 1",
                    "INFO", "INFO a b", "INFO bad!name", "HOLDERS",
                    "WAITERS", "DELETE", "DELETE a b", "RESIZE a",
                    "RESIZE a -1", "RESIZE a 2147483648"):
            expect_err(c, req, "PROTO")
        eq(c.listing("LIST"), [], "no malformed request created anything")
        expect(c, "CREATE " + "x" * 200 + " 1", "OK",
               "a 200-byte name is accepted")
        expect(c, "CREATE AZaz09_.:/- 1", "OK",
               "every allowed name character: A-Z a-z 0-9 _ . : / -")
        expect(c, "CREATE big 2147483647", "OK", "capacity 2^31-1 accepted")
        expect(c, "CREATE zeros 007", "OK", "leading zeros accepted")
        r = c.info("zeros")
        eq(r.get("capacity"), "7", "CREATE zeros 007 gives capacity 7")
        expect(c, "PING", "OK PONG", "the connection is still usable")


def test_create():
    with start_semd() as d:
        c = d.connect()
        expect(c, "CREATE a 1", "OK")
        expect(c, "CREATE a 1", "OK", "CREATE again, same capacity -> OK")
        expect_err(c, "CREATE a 2", "EXISTS",
                   "CREATE again, other capacity -> ERR EXISTS")
        expect(c, "INFO a", "OK name=a capacity=1 used=0 available=1 "
               "holders=0 waiters=0", "ERR EXISTS changed nothing")
        tok = expect_token(c, "ACQUIRE a")
        expect(c, "CREATE a 1", "OK", "CREATE of a held sem, same capacity")
        expect(c, "INFO a", "OK name=a capacity=1 used=1 available=0 "
               "holders=1 waiters=0", "...keeps its holder")
        expect(c, "RELEASE a %d" % tok, "OK")


def test_error_order():
    with start_semd() as d:
        c = d.connect()
        # PROTO (form) before NOSEM (existence).
        expect_err(c, "ACQUIRE nosuch 0", "PROTO",
                   "ACQUIRE nosuch 0 -> ERR PROTO (form before existence)")
        expect_err(c, "RELEASE nosuch abc", "PROTO")
        expect_err(c, "REFRESH nosuch 1 -5", "PROTO")
        # NOSEM before the command's own errors.
        expect_err(c, "ACQUIRE nosuch 5", "NOSEM",
                   "ACQUIRE nosuch 5 -> ERR NOSEM (existence before RANGE)")
        for req in ("ACQUIRE nosuch", "TRY nosuch", "TRY nosuch 3 LEASE 10",
                    "RELEASE nosuch 1", "REFRESH nosuch 1 100",
                    "ATTACH nosuch 1", "CHECK nosuch 1", "REVOKE nosuch 1",
                    "INFO nosuch", "HOLDERS nosuch", "WAITERS nosuch",
                    "RESIZE nosuch 1", "DELETE nosuch"):
            expect_err(c, req, "NOSEM")


def test_acquire_forms():
    with start_semd("--semaphore", "q", "10") as d:
        c = d.connect()
        t = expect_token(c, "ACQUIRE q")
        expect(c, "CHECK q %d" % t, "OK n=1 kind=conn ttl_ms=-",
               "ACQUIRE without n takes 1, bound to the connection")
        t = expect_token(c, "ACQUIRE q 2")
        expect(c, "CHECK q %d" % t, "OK n=2 kind=conn ttl_ms=-")
        t = expect_token(c, "ACQUIRE q 1 TIMEOUT 0 LEASE 60000")
        match(c.cmd("CHECK q %d" % t), r"OK n=1 kind=lease ttl_ms=[0-9]+",
              "TIMEOUT then LEASE")
        t = expect_token(c, "ACQUIRE q LEASE 60000 TIMEOUT 0")
        match(c.cmd("CHECK q %d" % t), r"OK n=1 kind=lease ttl_ms=[0-9]+",
              "LEASE then TIMEOUT (either order)")
        expect_token(c, "ACQUIRE q TIMEOUT 100")
        expect_token(c, "ACQUIRE q 1 LEASE 60000")
        eq(c.info("q").get("used"), "7", "INFO used is the sum of n")
        for req in ("ACQUIRE", "ACQUIRE q 0", "ACQUIRE q -1", "ACQUIRE q x",
                    "ACQUIRE q 2147483648", "ACQUIRE q 1 TIMEOUT",
                    "ACQUIRE q 1 LEASE", "ACQUIRE q TIMEOUT 1 TIMEOUT 1",
                    "ACQUIRE q LEASE 1 LEASE 1", "ACQUIRE q 1 2",
                    "ACQUIRE q TIMEOUT -1", "ACQUIRE q TIMEOUT 2147483648",
                    "ACQUIRE q LEASE 2147483648", "ACQUIRE q 1 FOREVER",
                    "ACQUIRE q TIMEOUT 1 1", "ACQUIRE q LEASE x",
                    "TRY", "TRY q 0", "TRY q TIMEOUT 5", "TRY q 1 2",
                    "TRY q LEASE", "TRY q LEASE 1 LEASE 1"):
            expect_err(c, req, "PROTO")
        expect_err(c, "ACQUIRE q 11", "RANGE", "ACQUIRE n > capacity -> "
                   "ERR RANGE at once")
        expect_err(c, "ACQUIRE q 2147483647", "RANGE")
        expect_err(c, "TRY q 11", "RANGE")
        expect_err(c, "ACQUIRE q 11 TIMEOUT 0", "RANGE")
        expect(c, "INFO q", "OK name=q capacity=10 used=7 available=3 "
               "holders=6 waiters=0", "failed requests changed nothing")
        t = expect_token(c, "TRY q 2")
        expect(c, "CHECK q %d" % t, "OK n=2 kind=conn ttl_ms=-",
               "TRY q 2 binds 2")
        t = expect_token(c, "TRY q LEASE 60000")
        match(c.cmd("CHECK q %d" % t), r"OK n=1 kind=lease ttl_ms=[0-9]+",
              "TRY q LEASE 60000 is a lease")
        expect(c, "TRY q", "TIMEOUT", "TRY when full -> TIMEOUT at once")
        expect(c, "ACQUIRE q TIMEOUT 0", "TIMEOUT",
               "ACQUIRE TIMEOUT 0 when full -> TIMEOUT at once")
        expect(c, "INFO q", "OK name=q capacity=10 used=10 available=0 "
               "holders=8 waiters=0", "TIMEOUT left no waiter behind")


def test_tokens():
    with start_semd() as d:
        c = d.connect()
        expect(c, "CREATE a 5", "OK")
        expect(c, "CREATE b 5", "OK")
        toks = [expect_token(c, "ACQUIRE a")]
        eq(toks[0], 1, "the first token of a fresh daemon is 1")
        toks.append(expect_token(c, "ACQUIRE b"))
        toks.append(expect_token(c, "TRY a 2"))
        toks.append(expect_token(c, "ACQUIRE b 1 LEASE 60000"))
        ok(all(x < y for x, y in zip(toks, toks[1:])),
           "tokens strictly increase across semaphores (daemon-wide)",
           "got %r" % toks)
        for t in toks[:3]:
            c.cmd("RELEASE %s %d" % ("a" if t != toks[1] else "b", t))
        c.cmd("REVOKE b %d" % toks[3])
        expect(c, "DELETE a", "OK")
        expect(c, "CREATE a 5", "OK")
        t = expect_token(c, "ACQUIRE a")
        ok(t > max(toks), "DELETE + CREATE of the same name: a higher token",
           "got %d after %r" % (t, toks))


def test_release():
    with start_semd("--semaphore", "r", "3", "--semaphore", "x", "3") as d:
        a = d.connect()
        b = d.connect()
        ta = expect_token(a, "ACQUIRE r")
        expect_err(b, "RELEASE r %d" % ta, "NOTOWNER",
                   "RELEASE of another live connection's bound permit -> "
                   "ERR NOTOWNER")
        expect(b, "CHECK r %d" % ta, "OK n=1 kind=conn ttl_ms=-",
               "...and it is still held")
        tx = expect_token(a, "ACQUIRE x")
        expect_err(a, "RELEASE r %d" % tx, "NOTHELD",
                   "RELEASE with a token of another semaphore -> ERR NOTHELD")
        expect(a, "CHECK x %d" % tx, "OK n=1 kind=conn ttl_ms=-",
               "...which stays held on its own semaphore")
        expect(a, "RELEASE r %d" % ta, "OK")
        expect_err(a, "RELEASE r %d" % ta, "NOTHELD",
                   "second RELEASE of a token -> ERR NOTHELD")
        expect_err(a, "RELEASE r 999999", "NOTHELD",
                   "RELEASE of a never-granted token -> ERR NOTHELD")
        expect_err(a, "RELEASE r 18446744073709551615", "NOTHELD",
                   "token 2^64-1 is well-formed: ERR NOTHELD")
        for req in ("RELEASE r", "RELEASE r abc", "RELEASE r -1",
                    "RELEASE r 18446744073709551616", "RELEASE r 1 2",
                    "RELEASE", "RELEASE r 1x"):
            expect_err(a, req, "PROTO")
        tl = expect_token(a, "ACQUIRE r LEASE 60000")
        expect(b, "RELEASE r %d" % tl, "OK",
               "anyone with the token may RELEASE a lease")
        expect(a, "INFO r", "OK name=r capacity=3 used=0 available=3 "
               "holders=0 waiters=0")
        expect(a, "RELEASE x %d" % tx, "OK")


def test_check():
    with start_semd("--semaphore", "k", "5") as d:
        a = d.connect()
        b = d.connect()
        t = expect_token(a, "ACQUIRE k 2")
        expect(a, "CHECK k %d" % t, "OK n=2 kind=conn ttl_ms=-")
        expect(b, "CHECK k %d" % t, "OK n=2 kind=conn ttl_ms=-",
               "CHECK works from any connection")
        tl = expect_token(a, "ACQUIRE k 3 LEASE 60000")
        r = b.cmd("CHECK k %d" % tl)
        m = re.fullmatch(r"OK n=3 kind=lease ttl_ms=([0-9]+)", r)
        ok(m and 0 < int(m.group(1)) <= 60000,
           "CHECK of a lease: n=3 kind=lease ttl_ms in (0, 60000]",
           "got %r" % r)
        expect_err(a, "CHECK k 424242", "NOTHELD")
        expect(a, "RELEASE k %d" % t, "OK")
        expect_err(b, "CHECK k %d" % t, "NOTHELD",
                   "CHECK after RELEASE -> ERR NOTHELD")
        for req in ("CHECK k", "CHECK k x", "CHECK", "CHECK k 1 2"):
            expect_err(a, req, "PROTO")


def test_revoke():
    with start_semd("--semaphore", "v", "2") as d:
        a = d.connect()
        op = d.connect()
        w = d.connect()
        t1 = expect_token(a, "ACQUIRE v")
        t2 = expect_token(a, "ACQUIRE v")
        w.send("ACQUIRE v\r\n")
        ok(wait_until(lambda: op.info("v")["waiters"] == "1"),
           "a third ACQUIRE waits")
        expect(op, "REVOKE v %d" % t1, "OK",
               "an operator REVOKEs a grant bound to another connection")
        tw = is_token(w.line(10), "the revoke let the waiter in")
        expect_err(a, "RELEASE v %d" % t1, "NOTHELD",
                   "the revoked owner's RELEASE -> ERR NOTHELD")
        expect_err(a, "CHECK v %d" % t1, "NOTHELD")
        expect_err(op, "REVOKE v %d" % t1, "NOTHELD",
                   "REVOKE of a revoked token -> ERR NOTHELD")
        expect(a, "RELEASE v %d" % t2, "OK")
        tl = expect_token(op, "ACQUIRE v LEASE 60000")
        expect(a, "REVOKE v %d" % tl, "OK", "REVOKE of a lease")
        expect_err(op, "REFRESH v %d 1000" % tl, "NOTHELD",
                   "REFRESH of a revoked lease -> ERR NOTHELD")
        expect(op, "INFO v", "OK name=v capacity=2 used=1 available=1 "
               "holders=1 waiters=0")
        expect(w, "RELEASE v %d" % tw, "OK")
        expect_err(op, "REVOKE v 777777", "NOTHELD")
        for req in ("REVOKE v", "REVOKE v x", "REVOKE"):
            expect_err(op, req, "PROTO")


def test_attach():
    with start_semd("--semaphore", "at", "2") as d:
        c = d.connect()
        expect_err(c, "ATTACH at 1", "NOTHELD",
                   "ATTACH answers ERR NOTHELD (no persistence yet)")
        t = expect_token(c, "ACQUIRE at")
        expect(c, "RELEASE at %d" % t, "OK")
        expect_err(c, "ATTACH at %d" % t, "NOTHELD",
                   "ATTACH of a released token -> ERR NOTHELD")
        for req in ("ATTACH at", "ATTACH at x", "ATTACH"):
            expect_err(c, req, "PROTO")


def test_resize():
    with start_semd() as d:
        a = d.connect()
        b = d.connect()
        expect(a, "CREATE r 1", "OK")
        ta = expect_token(a, "ACQUIRE r")
        b.send("ACQUIRE r\r\n")
        ok(wait_until(lambda: a.info("r")["waiters"] == "1"),
           "ACQUIRE on a full sem waits")
        expect(a, "RESIZE r 2", "OK")
        tb = is_token(b.line(10), "growing with RESIZE wakes the waiter")
        expect(a, "INFO r", "OK name=r capacity=2 used=2 available=0 "
               "holders=2 waiters=0")
        expect(b, "RELEASE r %d" % (tb or 0), "OK")
        expect(a, "RELEASE r %d" % ta, "OK")
        toks = [expect_token(a, "ACQUIRE r")]
        expect(a, "RESIZE r 3", "OK")
        toks += [expect_token(a, "ACQUIRE r"), expect_token(a, "ACQUIRE r")]
        expect(a, "RESIZE r 1", "OK", "RESIZE below used -> OK")
        expect(a, "INFO r", "OK name=r capacity=1 used=3 available=0 "
               "holders=3 waiters=0",
               "shrinking revokes nothing; available is max(0, cap-used)")
        expect(a, "TRY r", "TIMEOUT")
        expect(a, "RELEASE r %d" % toks[0], "OK")
        expect(a, "TRY r", "TIMEOUT", "used 2 > capacity 1: still TIMEOUT")
        expect(a, "RELEASE r %d" % toks[1], "OK")
        expect(a, "TRY r", "TIMEOUT", "used 1 = capacity 1: still TIMEOUT")
        expect(a, "RELEASE r %d" % toks[2], "OK")
        t = expect_token(a, "TRY r", "used 0: TRY granted again")
        expect(a, "RELEASE r %d" % t, "OK")
        expect(a, "RESIZE r 0", "OK", "RESIZE to 0 -> OK")
        expect(a, "INFO r", "OK name=r capacity=0 used=0 available=0 "
               "holders=0 waiters=0")
        expect_err(a, "ACQUIRE r", "RANGE",
                   "after RESIZE 0, ACQUIRE -> ERR RANGE")
        expect_err(a, "TRY r", "RANGE", "after RESIZE 0, TRY -> ERR RANGE")
        expect(a, "RESIZE r 2147483647", "OK")
        expect(a, "RESIZE r 0005", "OK")
        eq(a.info("r").get("capacity"), "5", "RESIZE r 0005 -> capacity 5")


def test_delete():
    with start_semd() as d:
        a = d.connect()
        b = d.connect()
        expect(a, "CREATE d 1", "OK")
        ta = expect_token(a, "ACQUIRE d")
        expect_err(b, "DELETE d", "BUSY", "DELETE with a holder -> ERR BUSY")
        b.send("ACQUIRE d\r\n")
        ok(wait_until(lambda: a.info("d")["waiters"] == "1"), "b waits")
        expect_err(a, "DELETE d", "BUSY",
                   "DELETE with holders and waiters -> ERR BUSY")
        expect(a, "RELEASE d %d" % ta, "OK")
        tb = is_token(b.line(10), "the waiter gets the permit") or 0
        expect_err(a, "DELETE d", "BUSY")
        expect(b, "RELEASE d %d" % tb, "OK")
        tl = expect_token(a, "ACQUIRE d LEASE 60000")
        expect_err(a, "DELETE d", "BUSY", "DELETE with a lease -> ERR BUSY")
        expect(a, "RELEASE d %d" % tl, "OK")
        expect(a, "DELETE d", "OK", "DELETE of an idle sem -> OK")
        expect_err(a, "INFO d", "NOSEM", "INFO after DELETE -> ERR NOSEM")
        expect_err(a, "ACQUIRE d", "NOSEM")
        expect_err(a, "DELETE d", "NOSEM", "DELETE twice -> ERR NOSEM")
        expect(a, "CREATE d 4", "OK", "CREATE after DELETE, new capacity")
        expect(a, "INFO d", "OK name=d capacity=4 used=0 available=4 "
               "holders=0 waiters=0")
        t = expect_token(a, "ACQUIRE d")
        ok(t > max(ta, tb, tl), "token after DELETE+CREATE is higher",
           "%d vs %r" % (t, (ta, tb, tl)))


def test_info_holders_waiters():
    with start_semd("--semaphore", "h", "4", "--semaphore", "w", "1") as d:
        a = d.connect()
        b = d.connect()
        c = d.connect()
        eq(a.listing("HOLDERS h"), [], "HOLDERS of an idle sem: OK 0")
        eq(a.listing("WAITERS h"), [], "WAITERS of an idle sem: OK 0")
        t1 = expect_token(a, "ACQUIRE h 2")
        t2 = expect_token(b, "ACQUIRE h 1")
        t3 = expect_token(a, "ACQUIRE h 1 LEASE 60000")
        expect(c, "INFO h", "OK name=h capacity=4 used=4 available=0 "
               "holders=3 waiters=0")
        hs = c.listing("HOLDERS h")
        eq(len(hs), 3, "HOLDERS lists 3 grants")
        if len(hs) == 3:
            eq([list(x)[:5] for x in hs],
               [["token", "n", "kind", "owner", "ttl_ms"]] * 3,
               "HOLDERS keys: token n kind owner ttl_ms")
            eq([x.get("token") for x in hs], [str(t1), str(t2), str(t3)],
               "HOLDERS in grant order")
            eq([x.get("n") for x in hs], ["2", "1", "1"], "HOLDERS n")
            eq([x.get("kind") for x in hs], ["conn", "conn", "lease"],
               "HOLDERS kind")
            oa, ob = hs[0].get("owner", ""), hs[1].get("owner", "")
            ok(re.fullmatch(r"[1-9][0-9]*", oa) and
               re.fullmatch(r"[1-9][0-9]*", ob) and oa != ob,
               "bound grants: owner is a positive connection id, one per "
               "connection", "owners %r %r" % (oa, ob))
            eq([hs[0].get("ttl_ms"), hs[1].get("ttl_ms")], ["-", "-"],
               "bound grants: ttl_ms=-")
            ttl = hs[2].get("ttl_ms", "")
            ok(re.fullmatch(r"[0-9]+", ttl) and 0 < int(ttl) <= 60000,
               "lease: ttl_ms in (0, 60000]", "got %r" % ttl)
            ok(re.fullmatch(r"-|[1-9][0-9]*", hs[2].get("owner", "")),
               "lease: owner is - or a connection id", repr(hs[2]))
        # Waiters, in queue order, with their owners.
        tw = expect_token(a, "ACQUIRE w")
        b.send("ACQUIRE w\r\n")
        ok(wait_until(lambda: a.info("w")["waiters"] == "1"), "b waits on w")
        c.send("ACQUIRE w 1 TIMEOUT 60000\r\n")
        ok(wait_until(lambda: a.info("w")["waiters"] == "2"), "c waits on w")
        ws = a.listing("WAITERS w")
        eq(len(ws), 2, "WAITERS lists 2 waiters")
        if len(ws) == 2:
            eq([list(x)[:3] for x in ws], [["n", "waited_ms", "owner"]] * 2,
               "WAITERS keys: n waited_ms owner")
            ok(all(re.fullmatch(r"[0-9]+", x.get("waited_ms", ""))
                   for x in ws), "waited_ms is a number of ms", repr(ws))
            eq(ws[0].get("owner"), ob if len(hs) == 3 else ws[0]["owner"],
               "WAITERS owner is the same connection id as in HOLDERS")
            ok(ws[0].get("owner") != ws[1].get("owner") and
               re.fullmatch(r"[1-9][0-9]*", ws[1].get("owner", "")),
               "the two waiters have distinct connection ids", repr(ws))
        expect(a, "INFO w", "OK name=w capacity=1 used=1 available=0 "
               "holders=1 waiters=2")
        expect(a, "RELEASE w %d" % tw, "OK")
        tb = is_token(b.line(10), "queue head b is granted") or 0
        ws2 = a.listing("WAITERS w")
        eq([x.get("owner") for x in ws2],
           [ws[1].get("owner")] if len(ws) == 2 else [],
           "c is now the only waiter")
        hw = a.listing("HOLDERS w")
        eq([(x.get("token"), x.get("owner")) for x in hw],
           [(str(tb), ws[0].get("owner") if ws else None)],
           "HOLDERS w shows b's grant with b's connection id")


def test_list():
    with start_semd() as d:
        c = d.connect()
        eq(c.listing("LIST"), [], "LIST with no semaphores: OK 0")
        names = ["b", "a", "C", "a.b", "a-b", "Z", "a/b", "_x", "0"]
        for i, n in enumerate(names):
            expect(c, "CREATE %s %d" % (n, i + 1), "OK")
        t = expect_token(c, "ACQUIRE a-b 2")
        rows = c.listing("LIST")
        eq([r.get("name") for r in rows],
           sorted(names, key=lambda s: s.encode()),
           "LIST is sorted by name (byte order)")
        eq([list(r)[:6] for r in rows],
           [["name", "capacity", "used", "available", "holders",
             "waiters"]] * len(rows), "LIST lines are INFO-style")
        for r in rows:
            inf = c.info(r.get("name", "?"))
            # INFO has the metrics words too (wait_p50_ms ...); LIST not.
            inf = {k: v for k, v in inf.items()
                   if k not in ("wait_p50_ms", "wait_p99_ms",
                                "grants_total", "timeouts_total")}
            if inf != r:
                eq(r, inf, "LIST line of %s equals its INFO" % r.get("name"))
                break
        else:
            ok(True, "every LIST line equals its INFO")
        expect(c, "RELEASE a-b %d" % t, "OK")
        c.send("LIST\r\nPING\r\n")
        head = c.line()
        eq(head, "OK %d" % len(names), "LIST head is OK <k>")
        c.lines(len(names))
        eq(c.line(), "OK PONG", "exactly k lines follow the LIST head")


def test_stats():
    status, out, _ = run_semd("--version")
    m = re.match(r"semd (\S+)", out)
    version = m.group(1) if status == 0 and m else None
    with start_semd("--semaphore", "s", "3", "--semaphore", "t", "1") as d:
        a = d.connect()
        b = d.connect()
        a.send("STATS\r\n")
        head = a.line()
        m = re.fullmatch(r"OK ([0-9]+)", head)
        ok(m, "STATS head is OK <k>", "got %r" % head)
        raw = a.lines(int(m.group(1))) if m else []
        bad = [x for x in raw if not re.fullmatch(r"[a-z_][a-z0-9_]*=\S*", x)]
        ok(raw and not bad, "each STATS line is one key=value", repr(bad))
        st = dict(x.split("=", 1) for x in raw if "=" in x)
        for k in ("version", "uptime", "connections", "semaphores", "grants",
                  "timeouts", "persistence", "waiters"):
            ok(k in st, "STATS has %s" % k, "keys %r" % sorted(st))
        eq(st.get("persistence"), "off", "STATS persistence=off")
        eq(st.get("version"), version,
           "STATS version is the version of semd --version")
        eq(st.get("protocol"), "1.1",
           "STATS protocol=1.1: the 1.1 commands are served")
        ok(status == 0 and "(protocol 1.1)" in out,
           "semd --version names protocol 1.1", out)
        eq(st.get("semaphores"), "2", "STATS semaphores=2")
        eq(st.get("grants"), "0", "STATS grants=0")
        eq(st.get("waiters"), "0", "STATS waiters=0")
        ok(st.get("connections", "").isdigit() and
           int(st["connections"]) >= 2, "STATS connections counts us (>=2)",
           repr(st.get("connections")))
        ok(st.get("uptime", "").isdigit(), "STATS uptime is a number",
           repr(st.get("uptime")))
        expect_token(a, "ACQUIRE s 2")
        expect_token(a, "ACQUIRE s 1 LEASE 60000")
        expect_token(a, "ACQUIRE t")
        b.send("ACQUIRE t\r\n")
        ok(wait_until(lambda: a.info("t")["waiters"] == "1"), "b waits on t")
        st2 = a.stats()
        eq(st2.get("grants"), "3", "STATS grants counts grants held now")
        eq(st2.get("waiters"), "1", "STATS waiters counts queued acquires")
        expect(a, "CREATE u 1", "OK")
        eq(a.stats().get("semaphores"), "3", "STATS semaphores after CREATE")
        t0 = int(st2.get("timeouts", "0") or 0)
        c = d.connect()
        eq(c.cmd("ACQUIRE t TIMEOUT 50", 10), "TIMEOUT",
           "ACQUIRE TIMEOUT 50 on a full sem -> TIMEOUT")
        eq(a.stats().get("timeouts"), str(t0 + 1),
           "STATS timeouts counts that timeout")


def test_auth_without_password():
    with start_semd() as d:
        c = d.connect()
        expect_err(c, "AUTH secret", "AUTH",
                   "AUTH when no password is configured -> ERR AUTH")
        expect(c, "PING", "OK PONG")
        expect(c, "CREATE a 1", "OK", "no password: commands are served")


def test_quit():
    with start_semd("--semaphore", "s", "1") as d:
        a = d.connect()
        b = d.connect()
        expect_token(a, "ACQUIRE s")
        expect_err(a, "QUIT now", "PROTO")
        a.send("quit\r\nPING\r\n")
        eq(a.line(), "OK", "quit (lower case) -> OK")
        ok(a.expect_closed(5), "connection closed after QUIT")
        eq(getattr(a, "extra", b""), b"", "no reply to what followed QUIT")
        ok(wait_until(lambda: b.info("s")["used"] == "0"),
           "QUIT released the connection's bound permit")


if __name__ == "__main__":
    run(test_readme_quick_check, test_line_format, test_unknown_and_malformed,
        test_create, test_error_order, test_acquire_forms, test_tokens,
        test_release, test_check, test_revoke, test_attach, test_resize,
        test_delete, test_info_holders_waiters, test_list, test_stats,
        test_auth_without_password, test_quit)
