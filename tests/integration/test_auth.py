#!/usr/bin/env python3
"""requirepass and protected mode."""
import os
import socket
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F403

PW = "s3cret-Pa55word-XYZZY"


def test_requirepass():
    with start_semd("--requirepass", PW, "--loglevel", "debug",
                    "--semaphore", "s", "2") as d:
        c = d.connect()
        expect(c, "PING", "OK PONG", "PING works before AUTH")
        for req in ("CREATE a 1", "INFO s", "ACQUIRE s", "TRY s",
                    "RELEASE s 1", "LIST", "STATS", "HOLDERS s",
                    "WAITERS s", "DELETE s", "RESIZE s 3", "CHECK s 1",
                    "REVOKE s 1", "REFRESH s 1 100", "ATTACH s 1",
                    "INFO nosuch"):
            expect_err(c, req, "AUTH", "before AUTH: %s -> ERR AUTH" %
                       show(req))
        # Form errors come before the auth check.
        for req in ("FOO", "CREATE", "ACQUIRE s 0", "INFO bad!name",
                    "AUTH", "AUTH a b"):
            expect_err(c, req, "PROTO", "before AUTH: %s -> ERR PROTO "
                       "(form before auth)" % show(req))
        expect_err(c, "AUTH wrong-password", "AUTH",
                   "a wrong AUTH -> ERR AUTH")
        expect_err(c, "AUTH " + PW + "x", "AUTH", "a longer password -> "
                   "ERR AUTH")
        expect_err(c, "AUTH " + PW[:-1], "AUTH", "a prefix -> ERR AUTH")
        expect_err(c, "AUTH " + PW.lower(), "AUTH",
                   "the password is case-sensitive")
        expect_err(c, "INFO s", "AUTH", "still not authenticated")
        expect(c, "AUTH " + PW, "OK", "the good password -> OK")
        expect(c, "INFO s", "OK name=s capacity=2 used=0 available=2 "
               "holders=0 waiters=0", "after AUTH, INFO works")
        expect(c, "CREATE a 1", "OK", "after AUTH, CREATE works")
        t = expect_token(c, "ACQUIRE s")
        expect(c, "RELEASE s %d" % t, "OK")
        eq(len(c.listing("LIST")), 2, "after AUTH, LIST works")
        c.stats()
        ok(True, "after AUTH, STATS works")
        expect(c, "auth " + PW, "OK", "AUTH again (lower-case verb) -> OK")
        o = d.connect()
        expect_err(o, "INFO s", "AUTH",
                   "authentication is per connection")
        expect(o, "QUIT", "OK", "QUIT works before AUTH")
        ok(o.expect_closed(5), "...and closes")
        ok(PW not in d.log_text() and PW[:-1] not in d.log_text(),
           "the password never appears in the log (loglevel debug)")


def test_failed_auth_logs_out():
    # README: "A failed AUTH logs the connection out."
    with start_semd("--requirepass", PW) as d:
        c = d.connect()
        expect(c, "AUTH " + PW, "OK")
        expect(c, "CREATE a 1", "OK")
        expect_err(c, "AUTH nope", "AUTH")
        expect_err(c, "INFO a", "AUTH",
                   "after a failed AUTH the connection is logged out")


def test_requirepass_from_file():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    conf = os.path.join(tmp, "semd.conf")
    with open(conf, "w") as f:
        f.write("requirepass %s\nloglevel debug\n" % PW)
    with start_semd("-c", conf) as d:
        c = d.connect()
        expect_err(c, "LIST", "AUTH", "requirepass from -c FILE applies")
        expect(c, "AUTH " + PW, "OK")
        eq(c.listing("LIST"), [], "after AUTH, LIST works")
        ok(PW not in d.log_text(), "the password is not logged")
    st, out, err = run_semd("-t", "-c", conf)
    eq(st, 0, "semd -t accepts the file")
    ok(PW not in out + err, "semd -t does not print the password")


def local_non_loopback_ipv4():
    """A non-loopback IPv4 address of this host, or None."""
    for target in ("192.0.2.1", "10.255.255.255", "8.8.8.8"):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.connect((target, 9))
            ip = s.getsockname()[0]
        except OSError:
            ip = None
        finally:
            s.close()
        if ip and not ip.startswith("127.") and ip != "0.0.0.0":
            try:
                t = socket.socket()
                t.bind((ip, 0))
                t.close()
                return ip
            except OSError:
                pass
    return None


def test_protected_mode():
    ip = local_non_loopback_ipv4()
    if ip is None:
        note("no non-loopback IPv4 address here: protected mode not tested")
        return
    note("non-loopback address: %s" % ip)

    def port_of(d):
        return [p for a, p in d.listeners if a == ip]

    with start_semd(bind="127.0.0.1 " + ip) as d:
        ports = port_of(d)
        ok(ports, "listening on %s too" % ip, repr(d.listeners))
        if ports:
            c = connect(ports[0], host=ip)
            r = c.try_line(5)
            is_err(r, "AUTH", "protected mode: a non-loopback client gets "
                   "ERR AUTH")
            ok(r is not None and "protected mode" in r,
               "...saying 'protected mode'", repr(r))
            ok(c.expect_closed(5), "...and is closed")
            c.close()
        lo = d.connect()
        expect(lo, "PING", "OK PONG", "loopback clients are served")
    with start_semd("--protected-mode", "no", bind="127.0.0.1 " + ip) as d:
        ports = port_of(d)
        if ports:
            with connect(ports[0], host=ip) as c:
                expect(c, "PING", "OK PONG",
                       "protected-mode no: a non-loopback client is served")
                expect(c, "CREATE x 1", "OK")
    with start_semd("--requirepass", PW, bind="127.0.0.1 " + ip) as d:
        ports = port_of(d)
        if ports:
            with connect(ports[0], host=ip) as c:
                expect(c, "PING", "OK PONG", "with a password, a "
                       "non-loopback client is admitted")
                expect_err(c, "CREATE x 1", "AUTH", "...but must AUTH")
                expect(c, "AUTH " + PW, "OK")
                expect(c, "CREATE x 1", "OK")


if __name__ == "__main__":
    run(test_requirepass, test_failed_auth_logs_out,
        test_requirepass_from_file, test_protected_mode)
