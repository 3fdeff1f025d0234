#!/usr/bin/env python3
"""Host lists and failover, against fake semd: libsemc and semd-cli go to
the owner a standby names and send the refused request again there; with
no owner named they try the list in turn; a dead address falls through
to the next; SEMD_HOSTS is read when nothing else names an address; a
search with no owner gives up with SEMC_ERR_CONNECT once its time is
out; a bound permit is re-attached on the owner even when a standby
refused the ATTACH first; a lost reply is never sent anywhere again."""
import os
import socket
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403


class Owner(Fake):
    """A fake owner: grants tokens from base up, ATTACH and RELEASE OK."""

    def __init__(self, base=5, family=socket.AF_INET):
        Fake.__init__(self, family)
        self.token = base

    def answer(self, words):
        verb = words[0].upper()
        if verb == "PING":
            return "OK PONG"
        if verb in ("ACQUIRE", "TRY"):
            if words[1] == "closes":
                return ""
            self.token += 1
            return "OK %d" % (self.token - 1)
        if verb in ("ATTACH", "RELEASE", "AUTH"):
            return "OK"
        return "ERR PROTO the fake owner does not know %s" % verb


class Standby(Fake):
    """A fake standby naming owner ("host:port" or "-")."""

    def __init__(self, owner):
        Fake.__init__(self)
        self.owner = owner

    def answer(self, words):
        verb = words[0].upper()
        if verb == "PING":
            return "OK PONG"
        if verb == "AUTH":
            return "OK"
        if verb == "ROLE":
            return "OK role=standby epoch=3 owner=%s" % self.owner
        return ("ERR STANDBY owner=%s epoch=3 this semd is a standby; the "
                "owner serves the data" % self.owner)


def addr(f):
    if f.sock.family == socket.AF_INET6:
        return "[::1]:%d" % f.port
    return "127.0.0.1:%d" % f.port


def dead():
    return "127.0.0.1:%d" % free_port()


def test_redirect():
    o = Owner()
    s = Standby(addr(o))
    api("follow", addr(s), 0)
    eq(len(s.verbs("TRY")), 1, "the standby was asked once")
    eq(len(o.verbs("TRY")), 2, "the owner it named got the request again, "
       "and the next request straight away")
    o6 = Owner(family=socket.AF_INET6)
    s6 = Standby(addr(o6))
    api("follow", addr(s6), 0)
    eq(len(o6.verbs("TRY")), 2, "an owner named as [::1]:PORT is found")
    for f in (o, s, o6, s6):
        f.close()


def test_owner_unknown():
    o = Owner()
    s = Standby("-")
    api("follow", "%s,%s" % (addr(s), addr(o)), 0)
    eq(len(s.verbs("TRY")), 1, "a standby that knows no owner: asked once")
    eq(len(o.verbs("TRY")), 2, "the next address in the list served")
    s.close()
    o.close()


def test_dead_first():
    o = Owner()
    api("follow", "%s,%s" % (dead(), addr(o)), -1)
    eq(len(o.verbs("TRY")), 2, "a dead first address falls through to "
       "the second, in one pass")
    o6 = Owner(family=socket.AF_INET6)
    api("follow", " %s , %s " % (dead(), addr(o6)), 0)
    eq(len(o6.verbs("TRY")), 2, "blanks around entries; [::1]:PORT")
    rc, out, err = cli(None, "-h", "%s,%s" % (dead(), addr(o)), "try",
                       "jobs", "--lease", "1m")
    ok((rc, out) == (0, "7\n"), "semd-cli -h DEAD,OWNER try: the token",
       (rc, out, err))
    rc, out, err = cli(None, "-h", "::1", "-p", o6.port, "try", "jobs",
                       "--lease", "1m")
    ok((rc, out) == (0, "7\n"), "semd-cli -h ::1 -p PORT: a bare IPv6 "
       "address is one host", (rc, out, err))
    rc, out, err = cli(None, "-h", "127.0.0.1", "-p", o.port, "ping")
    ok((rc, out) == (0, "PONG\n"), "semd-cli -h HOST -p PORT as before",
       (rc, out, err))
    o.close()
    o6.close()


def test_environment():
    o = Owner()
    env = {"SEMD_HOSTS": "%s,%s" % (dead(), addr(o))}
    api("follow", "-", 0, env=env)
    eq(len(o.verbs("TRY")), 2, "libsemc reads SEMD_HOSTS when the options "
       "name no address")
    rc, out, err = cli(None, "try", "jobs", "--lease", "1m", env=env)
    ok((rc, out) == (0, "7\n"), "semd-cli follows SEMD_HOSTS",
       (rc, out, err))
    rc, out, err = cli(None, "-h", dead(), "ping", env=env)
    eq(rc, 4, "-h wins over SEMD_HOSTS (a dead address: exit 4)")
    rc, out, err = cli(None, "ping", env={
        "SEMD_HOSTS": "127.0.0.1:%d" % o.port,
        "SEMD_HOST": "127.0.0.1", "SEMD_PORT": str(free_port())})
    eq(rc, 4, "SEMD_HOST wins over SEMD_HOSTS")
    o.close()


def test_bounded():
    s = Standby("-")
    api("giveup", "%s,%s" % (addr(s), dead()), 1500)
    n = len(s.verbs("TRY"))
    ok(3 <= n <= 30, "within 1500 ms the search went round several times, "
       "pausing between rounds (%d tries)" % n)
    s.requests.clear()
    api("giveup", "%s,%s" % (addr(s), dead()), -1)
    eq(len(s.verbs("TRY")), 1, "failover_timeout_ms -1: one pass")
    s.close()


def test_lost_reply():
    a = Owner()
    b = Owner()
    api("lostreply", "%s,%s" % (addr(a), addr(b)))
    eq(a.verbs("TRY"), ["TRY closes 1"], "sent once")
    eq(b.verbs("TRY"), [], "and never to the next address")
    a.close()
    b.close()


def read_until(p, word):
    """Relay semc_api's lines up to the one starting with word."""
    while True:
        ln = p.stdout.readline().decode()
        relay(ln, "semc_api")
        if not ln or ln.startswith(word):
            return ln


def test_reattach_through_standby():
    """A holds a bound permit and dies; B is a standby naming C, an owner
    not in the list: the ATTACH B refuses is sent to C."""
    a = Owner(base=5)
    c = Owner(base=100)
    b = Standby(addr(c))
    p = subprocess.Popen([SEMC_API, "failover", "%s,%s" % (addr(a),
                                                           addr(b))],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=client_env())
    read_until(p, "token")
    a.kill()
    p.stdin.write(b"go\n")
    p.stdin.flush()
    read_until(p, "attached")
    eq(b.verbs("ATTACH"), ["ATTACH jobs 5"], "the standby refused the "
       "ATTACH")
    eq(c.verbs("ATTACH"), ["ATTACH jobs 5"], "the owner it named got it")
    out, err = p.communicate(b"go\n", timeout=60)
    relay(out.decode(), "semc_api")
    no_sanitizer_report(err.decode(), "semc_api failover")
    eq(p.returncode, 0, "semc_api failover exits 0")
    eq(c.verbs("RELEASE"), ["RELEASE jobs 5"], "released on the owner")
    for f in (a, b, c):
        f.close()


def test_bad_lists():
    for bad in ("127.0.0.1:99999", "[::1", "[::1]x", "a,,b", "host:x",
                ":7313", ""):
        api("badlist", bad)
    rc, out, err = cli(None, "-h", "a,,b", "ping")
    eq(rc, 2, "semd-cli -h with a bad list: usage error")
    ok("host list" in err, "saying why", err)


run(test_redirect, test_owner_unknown, test_dead_first, test_environment,
    test_bounded, test_lost_reply, test_reattach_through_standby,
    test_bad_lists)
