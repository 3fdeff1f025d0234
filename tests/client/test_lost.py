#!/usr/bin/env python3
"""Replies that never come, and every ERR code: libsemc and semd-cli
against a scripted fake semd. A bound ACQUIRE whose reply is lost must be
"permit possibly lost", never "not granted" (a leased one is asked for
again with its request id: test_ids.py); each ERR code has its own
outcome; garbage is a bad reply; unknown fields are ignored."""
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403

CODES = ("PROTO TOOLONG AUTH NOSEM EXISTS RANGE NOTHELD NOTOWNER NOTLEASE "
         "BUSY LIMIT UNAVAILABLE FUTURE").split()


class Scripted(Fake):
    """The fake semd of these tests, answering from a script of rules."""

    def answer(self, words):
        """The reply to a request: a line, "" to close, None for silence."""
        verb = words[0].upper()
        name = words[1] if len(words) > 1 else ""
        if verb == "PING":
            return "OK PONG"
        if name.startswith("e") and name[1:] in CODES:
            return "ERR %s the fake says %s" % (name[1:], name[1:])
        if name == "closes":
            return ""
        if name == "silent":
            return None
        if name == "garbage":
            return "HELLO there"
        if name == "fields":
            return "OK name=fields"
        if name == "noname":
            return "OK capacity=4 used=1"
        if name == "extra":
            return ("OK name=extra capacity=4 used=1 available=3 "
                    "holders=1 waiters=0 color=blue future")
        return "ERR PROTO the fake does not know %s" % verb


def test_library():
    f = Scripted()
    try:
        api("fake", f.port)
        acquires = [r for r in f.requests if r.split()[0] in
                    ("ACQUIRE", "TRY")]
        eq(acquires, ["ACQUIRE closes 1", "TRY closes 1",
                      "ACQUIRE silent 1 TIMEOUT 100"],
           "each bound ACQUIRE/TRY whose reply was lost was sent once, "
           "never retried (a lease's, with its id: test_ids.py)")
    finally:
        f.close()


def test_cli():
    f = Scripted()
    try:
        rc, out, err = cli(f.port, input="acquire closes\n")
        eq(rc, 3, "semd-cli acquire (bound, from a pipe) with a lost reply "
           "exits 3, not 1")
        ok("may have been granted" in err, "and says a permit may have "
           "been granted", err)
        rc, out, err = cli(f.port, "--json", input="acquire closes\n")
        ok('"error":"LOST"' in out, "--json names the outcome LOST", out)
        rc, out, err = cli(f.port, "info", "eUNAVAILABLE")
        eq(rc, 3, "ERR UNAVAILABLE: exit 3")
        ok("the fake says UNAVAILABLE (ERR UNAVAILABLE)" in err,
           "the server's text and code are shown", err)
        marker = os.path.join(tempfile.mkdtemp(prefix="semdtest."), "ran")
        rc, out, err = cli(f.port, "run", "closes", "--", "touch", marker)
        eq(rc, 3, "run whose acquire reply is lost exits 3")
        ok(not os.path.exists(marker), "and does not run CMD")
    finally:
        f.close()


run(test_library, test_cli)
