#!/usr/bin/env python3
"""Who holds what (protocol 1.1): NAME, CLIENTS, KILL, name= and addr= in
HOLDERS and WAITERS (a lease keeps, and persists, those of the connection
that acquired it), and a failed AUTH logged at notice with the peer."""
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403

PW = "s3cret-Pa55word-XYZZY"


def restart_when_free(p, r):
    """kill -9 semd, wait until its ownership of the data set has run out
    (the owner key, if this semd keeps one, expires), start it again."""
    p.kill9()
    ok(wait_until(lambda: r.cmd("EXISTS", "semd:owner") == 0, 20),
       "the killed semd's ownership runs out")
    p.restarts += 1
    return p.start()


def addr_of(c):
    """The address semd sees for client connection c: 'ip:port'."""
    host, port = c.sock.getsockname()[:2]
    return "%s:%d" % (host, port)


def clients(c):
    """CLIENTS as {id(int): row}."""
    return {int(r["id"]): r for r in c.listing("CLIENTS")}


def my_id(c, asker=None):
    """The id of connection c: its CLIENTS line (asked on asker, or on c)
    is the one with c's address."""
    for i, r in clients(asker or c).items():
        if r["addr"] == addr_of(c):
            return i
    raise AssertionError("no CLIENTS line for %s" % addr_of(c))


def test_name():
    with start_semd() as d:
        a = d.connect()
        expect(a, "NAME billing-worker@web3:4121", "OK", "NAME -> OK")
        me = clients(a)[my_id(a)]
        eq(me["name"], "billing-worker@web3:4121", "CLIENTS shows the name")
        expect(a, "name second", "OK", "NAME again (lower-case verb)")
        eq(clients(a)[my_id(a)]["name"], "second", "a new NAME replaces")
        expect(a, "NAME " + "x" * 64, "OK", "a 64-byte label is accepted")
        eq(clients(a)[my_id(a)]["name"], "x" * 64, "...and shown whole")
        for bad in ("NAME " + "y" * 65, "NAME a=b", "NAME a!", "NAME",
                    "NAME a b", "NAME caf\xe9"):
            expect_err(a, bad, "PROTO", "%s -> ERR PROTO" % show(bad))
        eq(clients(a)[my_id(a)]["name"], "x" * 64,
           "a refused NAME leaves the name as it was")
        b = d.connect()
        expect(b, "PING", "OK PONG")
        eq(clients(a)[my_id(b, a)]["name"], "-", "a connection without NAME: "
           "name=-")


def test_clients_fields():
    with start_semd("--semaphore", "s", "1", "--semaphore", "t", "5") as d:
        a = d.connect()
        b = d.connect()
        w = d.connect()
        fresh = d.connect()
        expect(a, "NAME a@host", "OK")
        ta = expect_token(a, "ACQUIRE s")
        expect_token(a, "ACQUIRE t 2")
        expect_token(a, "ACQUIRE t LEASE 60000")
        expect(b, "PING", "OK PONG")
        w.send("ACQUIRE s\r\n")
        ok(w.no_reply(0.3), "the ACQUIRE on a full semaphore waits")
        time.sleep(0.3)
        rows = a.listing("CLIENTS")
        eq(len(rows), 4, "OK <k> with one line per open connection")
        eq([int(r["id"]) for r in rows], sorted(int(r["id"]) for r in rows),
           "CLIENTS lines come by id")
        for r in rows:
            eq(list(r), ["id", "addr", "name", "age_ms", "idle_ms", "grants",
                         "waiting", "cmd"], "CLIENTS keys, in order, for id "
               "%s" % r["id"])
        by_addr = {r["addr"]: r for r in rows}
        ra, rb, rw, rf = (by_addr.get(addr_of(x), {})
                          for x in (a, b, w, fresh))
        eq((ra.get("name"), ra.get("grants"), ra.get("waiting"),
            ra.get("cmd")), ("a@host", "2", "0", "clients"),
           "the asker: its name, 2 bound grants (its lease is nobody's), "
           "not waiting, cmd=clients")
        eq((rb.get("name"), rb.get("grants"), rb.get("waiting"),
            rb.get("cmd")), ("-", "0", "0", "ping"), "an idle connection")
        eq((rw.get("grants"), rw.get("waiting"), rw.get("cmd")),
           ("0", "1", "acquire"), "a waiting ACQUIRE: waiting=1 cmd=acquire")
        eq((rf.get("grants"), rf.get("waiting"), rf.get("cmd")),
           ("0", "0", "-"), "a connection that sent nothing: cmd=-")
        ok(int(rb.get("idle_ms", -1)) >= 250, "idle_ms counts since the "
           "last request", rb)
        ok(int(ra.get("idle_ms", 999)) < 250, "the asker is not idle", ra)
        ok(int(rf.get("age_ms", -1)) >= 550 and
           int(rf.get("idle_ms", -1)) >= 550, "age_ms and idle_ms count "
           "from the connect", rf)
        ok(all(int(r["age_ms"]) >= int(r["idle_ms"]) for r in rows),
           "idle_ms never exceeds age_ms", rows)
        expect(a, "RELEASE s %d" % ta, "OK")
        is_token(w.line(), "the waiter is granted")
        rw = clients(a)[my_id(w, a)]
        eq((rw["grants"], rw["waiting"]), ("1", "0"),
           "granted: grants=1 waiting=0")
        b.close()
        gone = wait_until(lambda: len(clients(a)) == 3, 5)
        ok(gone, "a closed connection leaves CLIENTS")


def test_clients_unix():
    sock = os.path.join(tempfile.mkdtemp(prefix="semdtest."), "semd.sock")
    with start_semd("--unixsocket", sock) as d:
        u = connect_unix(sock)
        expect(u, "NAME on-unix", "OK")
        rows = u.listing("CLIENTS")
        eq([(r["addr"], r["name"]) for r in rows], [("unix", "on-unix")],
           "a Unix-socket client: addr=unix")
        u.close()


def test_kill_other():
    with start_semd("--semaphore", "s", "1", "--semaphore", "l", "1") as d:
        op = d.connect()
        b = d.connect()
        c = d.connect()
        w2 = d.connect()
        tb = expect_token(b, "ACQUIRE s")
        tl = expect_token(b, "ACQUIRE l LEASE 60000")
        c.send("ACQUIRE s\r\n")
        ok(c.no_reply(0.3), "c waits behind b")
        cid, bid = my_id(c, op), my_id(b, op)
        eq(len(op.listing("WAITERS s")), 1, "one waiter")
        # Pipelined in one write: the WAITERS runs in the same turn.
        op.send("KILL %d\r\nWAITERS s\r\n" % cid)
        eq(op.lines(2), ["OK", "OK 0"], "KILL of the waiting connection: "
           "its waiter is dropped before the OK (a WAITERS pipelined right "
           "after it shows none)")
        ok(c.expect_closed(5), "the killed connection is closed")
        eq(c.buf, b"", "...without a reply to its ACQUIRE")
        w2.send("ACQUIRE s\r\n")
        ok(w2.no_reply(0.3), "another waiter queues")
        op.send("KILL %d\r\nINFO s\r\n" % bid)
        eq(op.line(), "OK", "KILL of the holder")
        eq(parse_kv(op.line()[3:])["holders"], "1", "its bound permit is "
           "released before the OK: INFO right after shows only the "
           "waiter's new grant")
        got = w2.line()
        is_token(got, "its bound permit was released: the waiter is "
                 "granted")
        h = op.listing("HOLDERS s")
        eq([int(x["token"]) for x in h], [int(got.split()[1])],
           "HOLDERS: the killed holder's token %d is gone" % tb)
        ok(b.expect_closed(5), "the killed holder is closed")
        eq([int(x["token"]) for x in op.listing("HOLDERS l")], [tl],
           "a lease of the killed connection stays, as on a close")
        ok(bid not in clients(op) and cid not in clients(op),
           "killed connections leave CLIENTS")
        expect_err(op, "KILL %d" % bid, "NOCONN",
                   "KILL of an id already killed -> ERR NOCONN")
        ok("killed by connection" in d.log_text(), "a KILL is logged")


def test_kill_self():
    with start_semd("--semaphore", "s", "1") as d:
        a = d.connect()
        o = d.connect()
        expect_token(a, "ACQUIRE s")
        aid = my_id(a)
        a.send("KILL %d\r\nPING\r\n" % aid)
        eq(a.line(), "OK", "KILL of oneself answers OK first")
        ok(a.expect_closed(5), "...then closes the connection")
        eq(a.extra, b"", "the request pipelined after it is not run")
        eq(o.listing("HOLDERS s"), [], "its bound permit is released")
        ok(aid not in clients(o), "it left CLIENTS")


def test_noconn():
    with start_semd() as d:
        a = d.connect()
        for req in ("KILL 999999", "KILL 0", "KILL 18446744073709551615"):
            expect_err(a, req, "NOCONN", "%s -> ERR NOCONN" % show(req))
        b = d.connect()
        bid = my_id(b)
        b.close()
        wait_until(lambda: bid not in clients(a), 5)
        expect_err(a, "KILL %d" % bid, "NOCONN",
                   "KILL of a closed connection -> ERR NOCONN")
        expect_err(a, "KILL x", "PROTO", "KILL x -> ERR PROTO")
        expect(a, "PING", "OK PONG", "the asker is still served")


def test_auth_required():
    with start_semd("--requirepass", PW, "--semaphore", "s", "1") as d:
        c = d.connect()
        for req in ("NAME me", "CLIENTS", "KILL 1", "WATCH s 1"):
            expect_err(c, req, "AUTH", "before AUTH: %s -> ERR AUTH"
                       % show(req))
        expect(c, "AUTH " + PW, "OK")
        expect(c, "NAME me", "OK", "after AUTH NAME works")
        eq(len(c.listing("CLIENTS")), 1, "after AUTH CLIENTS works")


def start_at_level(level):
    """semd --loglevel level (which may hide the 'listening' lines the
    harness waits for) on a free port; returns (semd, a connection)."""
    port = free_port()
    d = start_semd("--requirepass", PW, "--loglevel", level, "--port",
                   str(port), wait_ready=False)
    for _ in range(200):
        try:
            return d, connect(port)
        except OSError:
            time.sleep(0.05)
    raise AssertionError("semd --loglevel %s does not accept" % level)


def test_failed_auth_notice():
    for level, shown in (("info", True), ("notice", True), ("warn", False)):
        d, c = start_at_level(level)
        with d:
            expect_err(c, "AUTH wrong", "AUTH")
            peer = addr_of(c)
            lines = [ln for ln in d.log_lines("notice") if peer in ln]
            if shown:
                ok(wait_until(lambda: [ln for ln in d.log_lines("notice")
                                       if peer in ln and "AUTH" in ln], 5),
                   "loglevel %s: a failed AUTH is logged at notice with the "
                   "peer address %s" % (level, peer), d.log_text()[-600:])
            else:
                time.sleep(0.2)
                eq(lines, [], "loglevel warn: no notice line")
            ok("wrong" not in d.log_text(), "the attempt is never logged")
            if level == "notice":
                eq(d.log_lines("info"), [], "loglevel notice: no info lines")
    st, _, err = run_semd("--loglevel", "loud", "-t")
    ok(st == 1 and "notice" in err, "the loglevel error names notice", err)


def test_holders_waiters_labels():
    with start_semd("--semaphore", "s", "2") as d:
        a = d.connect()
        b = d.connect()
        w = d.connect()
        expect(a, "NAME alpha", "OK")
        expect(w, "NAME waiter@w1", "OK")
        ta = expect_token(a, "ACQUIRE s")
        tl = expect_token(b, "ACQUIRE s LEASE 60000")
        h = holders(a, "s")
        eq((h[ta]["name"], h[ta]["addr"]), ("alpha", addr_of(a)),
           "a bound grant: its connection's name and addr")
        eq((h[tl]["name"], h[tl]["addr"]), ("-", addr_of(b)),
           "a lease of an unnamed connection: name=- and its addr")
        eq(list(h[ta])[-2:], ["name", "addr"], "name= and addr= come last")
        w.send("ACQUIRE s\r\n")
        ok(w.no_reply(0.3), "w waits")
        wl = a.listing("WAITERS s")
        eq([(x["name"], x["addr"]) for x in wl],
           [("waiter@w1", addr_of(w))], "WAITERS: the waiting connection's "
           "name and addr")
        expect(a, "NAME renamed", "OK")
        expect(b, "NAME b-named", "OK")
        h = holders(a, "s")
        eq(h[ta]["name"], "renamed", "a bound grant shows its connection's "
           "name now")
        eq(h[tl]["name"], "-", "a lease keeps the name its connection had "
           "when it was granted")
        baddr = addr_of(b)
        b.close()
        time.sleep(0.2)
        h = holders(a, "s")
        eq((h[tl]["name"], h[tl]["addr"]), ("-", baddr),
           "the lease keeps them after its connection closed")
        # A lease granted after a wait is labelled too.
        expect(a, "RELEASE s %d" % tl, "OK")
        is_token(w.line(), "w is granted")
        w.send("ACQUIRE s LEASE 60000\r\n")
        ok(w.no_reply(0.3), "w waits for a lease")
        expect(a, "RELEASE s %d" % ta, "OK")
        tw = is_token(w.line(), "w's lease is granted after its wait")
        h = holders(a, "s")
        eq((h[tw]["name"], h[tw]["addr"]), ("waiter@w1", addr_of(w)),
           "a lease granted after a wait: the waiter's name and addr")


def test_labels_survive_restart():
    with start_redis() as r:
        p = start_semd_redis(r, "--semaphore", "s", "5", grace="10s")
        a = p.connect()
        b = p.connect()
        expect(a, "NAME lease-maker@h1:77", "OK")
        tl = expect_token(a, "ACQUIRE s LEASE 60000")
        tn = expect_token(b, "ACQUIRE s LEASE 60000")
        expect(b, "NAME bound-one", "OK")
        tb = expect_token(b, "ACQUIRE s")
        aaddr, baddr = addr_of(a), addr_of(b)
        g = redis_state(r)["sems"]["s"]["grants"]
        eq((g[tl].get("name"), g[tl].get("addr")),
           ("lease-maker@h1:77", aaddr), "Redis keeps a lease's name and "
           "addr (sync: written before OK)")
        eq((g[tn].get("name"), g[tn].get("addr")), ("-", baddr),
           "an unnamed connection's lease: name=- in Redis")
        eq((g[tb].get("name"), g[tb].get("addr")), ("-", "-"),
           "a bound grant: name=- addr=- in Redis (its connection's are "
           "live)")
        # A value written by an older semd, without name= and addr=.
        r.cmd("HSET", "semd:{s}:grants", "900",
              "n=1 kind=lease deadline_ms=%d" % (int(time.time() * 1000) +
                                                 60000))
        restart_when_free(p, r)
        c = p.connect()
        h = holders(c, "s")
        eq(sorted(h), sorted([tl, tn, tb, 900]), "every grant is back")
        eq((h[tl]["name"], h[tl]["addr"]), ("lease-maker@h1:77", aaddr),
           "after kill -9 and restart the lease keeps its name and addr")
        eq((h[tn]["name"], h[tn]["addr"]), ("-", baddr),
           "...and an unnamed one its addr")
        eq((h[tb]["name"], h[tb]["addr"], h[tb]["owner"]), ("-", "-", "-"),
           "an unowned grant after a restart: name=- addr=-")
        eq((h[900]["name"], h[900]["addr"]), ("-", "-"),
           "an old value without name=/addr= loads, shown as -")
        expect(c, "NAME taker", "OK")
        expect(c, "ATTACH s %d" % tb, "OK")
        h = holders(c, "s")
        eq((h[tb]["name"], h[tb]["addr"]), ("taker", addr_of(c)),
           "ATTACHed: its new connection's name and addr")


run(test_name, test_clients_fields, test_clients_unix, test_kill_other,
    test_kill_self, test_noconn, test_auth_required, test_failed_auth_notice,
    test_holders_waiters_labels, test_labels_survive_restart, time_limit=120)
