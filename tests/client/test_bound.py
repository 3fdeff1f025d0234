#!/usr/bin/env python3
"""The bound of bound permits (issue 16): libsemc learns reclaim-grace
with ROLE, sent in the same write as the first bound ACQUIRE; while it
holds bound permits semc_bound_keep() PINGs on the holding connection,
and when no request sent since now - reclaim-grace + margin has been
answered it reports them lost. Against a scripted fake semd (exact
control of what is answered and when) and a real semd with persistence
that is SIGSTOPped: the loss is reported, not before the bound allowed,
and not after it."""
import os
import select
import signal
import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403
from redistest import start_redis, start_semd_redis, stats_of  # noqa: E402,E501

GRACE_MS = 2000
MARGIN_MS = 500                     # max(2000/5, min(500, 2000/2))
WINDOW_MS = GRACE_MS - MARGIN_MS    # the bound after the last answer
PING_MS = WINDOW_MS / 4             # a PING every quarter of it


class Owner(Fake):
    """A fake owner with reclaim-grace GRACE_MS; silent=True stops every
    answer (as a SIGSTOPped semd); answered_at is when it last answered
    a PING (time.monotonic)."""

    def __init__(self, role="owner", role_reply=None):
        Fake.__init__(self)
        self.silent = False
        self.standby = False
        self.answered_at = None
        self.role_reply = role_reply or (
            "OK role=%s epoch=4 owner=127.0.0.1:1 owner_lease_ms=1000 "
            "reclaim_grace_ms=%d" % (role, GRACE_MS))

    def answer(self, words):
        if self.silent:
            return None
        verb = words[0].upper()
        if self.standby:
            if verb == "ROLE":
                return "OK role=standby epoch=4 owner=-"
            return "ERR STANDBY owner=- epoch=4 the fake is a standby"
        if verb == "ROLE":
            return self.role_reply
        if verb == "ACQUIRE":
            return "OK 7"
        if verb == "PING":
            self.answered_at = time.monotonic()
            return "OK PONG"
        if verb == "ATTACH":
            return "OK"
        return "ERR PROTO the fake does not know %s" % verb


class Api:
    """semc_api bound PORT, driven line by line on its stdin."""

    def __init__(self, port):
        self.p = subprocess.Popen([SEMC_API, "bound", str(port)],
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=client_env())
        self.buf = b""

    def line(self, timeout=15.0):
        """The next line that is not a check (checks are relayed)."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                ln, self.buf = self.buf.split(b"\n", 1)
                ln = ln.decode()
                if ln.startswith("ok - ") or ln.startswith("FAIL - "):
                    relay(ln, "semc_api")
                    continue
                if ln.startswith("#"):
                    note("semc_api: " + ln)
                    continue
                return ln
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if not r:
                return None
            data = os.read(self.p.stdout.fileno(), 4096)
            if not data:
                return None
            self.buf += data

    def say(self, text):
        self.p.stdin.write(text.encode() + b"\n")
        self.p.stdin.flush()

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        err = self.p.stderr.read().decode("utf-8", "replace")
        no_sanitizer_report(err, "semc_api bound")
        relay(self.p.stdout.read().decode("utf-8", "replace"), "semc_api")
        eq(self.p.returncode, 0, "semc_api bound exits 0")


def test_fake_owner():
    f = Owner()
    a = Api(f.port)
    try:
        ln = a.line()
        ok(ln is not None and ln.startswith("token 7 "),
           "a bound permit is held", ln)
        w = (ln or "").split()
        left = int(w[3]) if len(w) > 5 else -2
        eq(w[4:6], ["margin", str(MARGIN_MS)],
           "the margin for reclaim-grace %d ms is %d ms" %
           (GRACE_MS, MARGIN_MS))
        ok(WINDOW_MS - 1000 < left <= WINDOW_MS, "right after the ACQUIRE "
           "the bound has about reclaim-grace - margin (%d ms) left: %d" %
           (WINDOW_MS, left))
        eq(f.requests[:2], ["ROLE", "ACQUIRE jobs 1 TIMEOUT 1000"],
           "ROLE went right before the first bound ACQUIRE (pipelined)")

        # Answered all along: kept well past reclaim-grace.
        a.say("keep %d" % (2 * GRACE_MS))
        ln = a.line()
        ok(ln is not None and ln.startswith("kept "), "while PINGs are "
           "answered the permit is kept for 2 x reclaim-grace", ln)
        pings = len(f.verbs("PING"))
        ok(2 * GRACE_MS / PING_MS / 2 <= pings <= 2 * GRACE_MS / PING_MS
           + 3, "PINGs every quarter of the bound (%d ms): %d in %d ms" %
           (PING_MS, pings, 2 * GRACE_MS))
        eq(a.line(), "callbacks 0 bound 1", "nothing reported lost")

        # The fake stops answering, as a stopped semd.
        a.say("keep 20000")
        time.sleep(0.2)     # a PING or two answered first (not asserted)
        f.silent = True
        t_silent = time.monotonic()
        last = f.answered_at
        ln = a.line(timeout=20)
        ok(ln is not None and ln.startswith("lost "),
           "no answer: the permit is reported lost", ln)
        t_lost = int(ln.split()[1]) / 1000.0 if ln and \
            ln.startswith("lost ") else None
        if t_lost is not None and last is not None:
            after_last = t_lost - last
            after_silent = t_lost - t_silent
            note("lost %.3f s after the last answer, %.3f s after the "
                 "fake went silent (bound %.1f s, reclaim-grace %.1f s)" %
                 (after_last, after_silent, WINDOW_MS / 1000.0,
                  GRACE_MS / 1000.0))
            ok(after_silent >= (WINDOW_MS - PING_MS) / 1000.0 - 0.1,
               "not lost before the bound: %.3f s >= %.3f s after the "
               "answers stopped" % (after_silent,
                                    (WINDOW_MS - PING_MS) / 1000.0 - 0.1))
            ok(after_last < GRACE_MS / 1000.0,
               "lost before reclaim-grace after the last answered PING "
               "was received (so after it was sent): %.3f s < %.3f s" %
               (after_last, GRACE_MS / 1000.0))
        eq(a.line(), "lostpermit jobs 7", "semc_next_lost gives the permit")
        eq(a.line(), "callbacks 1 bound 0", "the lost callback was called "
           "once; the handle holds no bound permit")
        f.silent = False
        n = len(f.requests)
        a.say("reconnect")
        eq(a.line(), "reconnect OK", "a reconnect works")
        eq(a.line(), "callbacks 1 bound 0", "nothing to re-attach")
        ok(not [r for r in f.requests[n:] if r.startswith("ATTACH")],
           "a permit reported lost is never ATTACHed again")
    finally:
        a.close()
        f.kill()


def test_fake_reconnect_past_bound():
    """The connection closes and nobody answers: the handle keeps the
    permit for a reconnect within the bound, and semc_bound_keep reports
    it lost once the bound passed."""
    f = Owner()
    a = Api(f.port)
    try:
        ok((a.line() or "").startswith("token 7 "), "a bound permit is held")
        f.kill()            # closes every connection and the listener
        a.say("reconnect")
        ln = a.line()
        ok(ln is not None and ln.startswith("reconnect ERR_CONNECT"),
           "a reconnect with nobody listening fails", ln)
        eq(a.line(), "callbacks 0 bound 1", "within the bound the permit "
           "is kept for the next reconnect")
        time.sleep((WINDOW_MS + 200) / 1000.0)
        a.say("keep 0")
        ln = a.line()
        ok(ln is not None and ln.startswith("lost "), "past the bound "
           "semc_bound_keep reports the permit lost, connected or not", ln)
        eq(a.line(), "lostpermit jobs 7", "semc_next_lost gives it")
        eq(a.line(), "callbacks 1 bound 0", "... once, and forgets it")
    finally:
        a.close()
        f.kill()


def test_search_ends_with_bound():
    """The owner closes the connection and turns standby (knowing no
    owner): the reconnect searches, but returns by the end of the bound
    (a standby's ROLE does not erase it), and keep reports the loss."""
    f = Owner()
    a = Api(f.port)
    try:
        ok((a.line() or "").startswith("token 7 "), "a bound permit is held")
        f.standby = True
        with f.lock:
            for s in f.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        t0 = time.monotonic()
        a.say("reconnect")
        ln = a.line(timeout=30)
        took = time.monotonic() - t0
        ok(ln is not None and ln.startswith("reconnect ERR_CONNECT"),
           "no owner: the reconnect fails", ln)
        ok(took < WINDOW_MS / 1000.0 + 1.0, "... by the end of the bound "
           "(%.3f s < %.1f s + 1 s), not after the 15 s search" %
           (took, WINDOW_MS / 1000.0))
        ok(f.verbs("ATTACH"), "it tried to ATTACH on the standby")
        eq(a.line(), "callbacks 0 bound 1", "the permit is still held")
        a.say("keep 0")
        ln = a.line()
        ok(ln is not None and ln.startswith("lost "), "keep then reports "
           "it lost", ln)
        eq(a.line(), "lostpermit jobs 7", "semc_next_lost gives it")
        a.line()
    finally:
        a.close()
        f.kill()


def test_no_bound():
    """No bound without persistence (role=single) or without the keys
    (an older semd): no PINGs, nothing lost while the fake is silent."""
    for what, reply in (
            ("role=single", None),
            ("a ROLE without reclaim_grace_ms",
             "OK role=owner epoch=1 owner=-"),
            ("a semd that does not know ROLE",
             "ERR PROTO unknown command 'ROLE'")):
        f = Owner(role="single", role_reply=reply)
        a = Api(f.port)
        try:
            ln = a.line()
            ok(ln is not None and ln.startswith("token 7 left -1 margin -1"),
               "%s: a bound permit, and no bound applies" % what, ln)
            f.silent = True
            a.say("keep %d" % (GRACE_MS + 500))
            ln = a.line()
            ok(ln is not None and ln.startswith("kept left -1"),
               "%s: kept while semd is silent" % what, ln)
            eq(f.verbs("PING"), [], "%s: no PING sent" % what)
        finally:
            a.close()
            f.kill()


def test_real_semd_stopped():
    """A real owner with persistence, SIGSTOPped: the bound permit is
    reported lost between bound - one PING interval and reclaim-grace
    after the stop."""
    with start_redis() as r:
        d = start_semd_redis(r, "--semaphore", "jobs", "1",
                             "--owner-lease", "1s", grace="2s")
        c = d.connect()
        a = Api(d.port)
        stopped = False
        try:
            ln = a.line()
            ok(ln is not None and ln.startswith("token "),
               "a bound permit from a real owner", ln)
            ok(" margin %d" % MARGIN_MS in (ln or ""), "ROLE told "
               "reclaim-grace 2 s: margin %d ms" % MARGIN_MS, ln)
            a.say("keep %d" % (GRACE_MS + 500))
            ok((a.line() or "").startswith("kept "),
               "kept past reclaim-grace while semd answers")
            a.line()
            st = stats_of(c)
            ok(int(st.get("commands_ping", "0")) >= 3,
               "semd counted the keep-alive PINGs: %s" %
               st.get("commands_ping"))
            a.say("keep 20000")
            time.sleep(0.1)
            os.kill(d.d.pid, signal.SIGSTOP)
            stopped = True
            t_stop = time.monotonic()
            ln = a.line(timeout=20)
            ok(ln is not None and ln.startswith("lost "),
               "semd stopped: the permit is reported lost", ln)
            if ln and ln.startswith("lost "):
                after = int(ln.split()[1]) / 1000.0 - t_stop
                note("lost %.3f s after SIGSTOP (bound %.1f s after the "
                     "last answer, reclaim-grace %.1f s)" %
                     (after, WINDOW_MS / 1000.0, GRACE_MS / 1000.0))
                ok(after >= (WINDOW_MS - PING_MS) / 1000.0 - 0.1,
                   "not before bound - one PING interval: %.3f s" % after)
                ok(after < GRACE_MS / 1000.0, "before reclaim-grace after "
                   "the stop: %.3f s" % after)
            ln = a.line()
            ok(ln is not None and ln.startswith("lostpermit jobs "),
               "semc_next_lost gives the permit", ln)
        finally:
            if stopped:
                os.kill(d.d.pid, signal.SIGCONT)
            a.close()
        d.stop()


run(test_fake_owner, test_fake_reconnect_past_bound,
    test_search_ends_with_bound, test_no_bound,
    test_real_semd_stopped, time_limit=120)
