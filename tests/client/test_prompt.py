#!/usr/bin/env python3
"""semd-cli with no command on a terminal: a prompt (libedit) on one
connection, so a bound permit lives until released or the prompt ends;
history is saved, without AUTH lines."""
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403
from ptyterm import Term  # noqa: E402


def test_prompt():
    home = tempfile.mkdtemp(prefix="semdtest.")
    with start_semd("--semaphore", "jobs", "2",
                    "--requirepass", "pw") as d:
        env = dict(os.environ, HOME=home, TERM="dumb")
        t = Term(cli_argv(d.port), env)
        ok(t.read_until("semd 127.0.0.1:%d> " % d.port),
           "the prompt shows", t.text)
        t.send("ping")
        ok(t.read_until("PONG"), "ping -> PONG", t.text)
        t.send("info jobs")
        ok(t.read_until("(ERR AUTH)"), "info before auth: ERR AUTH", t.text)
        t.send("auth pw")
        ok(t.read_until("OK"), "auth pw", t.text)
        t.send("acquire jobs")
        ok(t.read_until("\n1\r\n") or t.read_until("1\r\n"),
           "acquire without --lease works here: token 1", t.text)
        c = d.connect()
        c.cmd("AUTH pw")
        eq(c.info("jobs")["used"], "1", "the bound permit is held")
        t.send("run jobs -- echo ran-the-command")
        ok(t.read_until("ran-the-command\r\n") and
           "Bad address" not in t.text,
           "run jobs -- CMD at the prompt runs CMD (its argv is "
           "NULL-terminated for execvp)", t.text)
        ok(t.read_until("semd 127.0.0.1:%d> " % d.port),
           "and the prompt comes back", t.text)
        t.send("run jobs -- true")
        ok(t.read_until("semd 127.0.0.1:%d> " % d.port) and
           "Bad address" not in t.text and "error" not in t.text,
           "run jobs -- true: no error", t.text)
        eq(c.info("jobs")["used"], "1", "run released its permit; the "
           "prompt's bound one stays")
        t.send("info nosuch")
        ok(t.read_until("no semaphore"), "an error is printed, the prompt "
           "goes on", t.text)
        t.send("quit")
        t.p.wait(timeout=10)
        os.close(t.master)
        ok(wait_until(lambda: c.info("jobs")["used"] == "0", 10),
           "leaving the prompt frees the bound permit")
        with open(os.path.join(home, ".semd_cli_history")) as f:
            hist = f.read()
        ok("ping" in hist and "acquire" in hist, "history is saved",
           hist)
        ok("auth" not in hist and "pw" not in hist,
           "without the password", hist)


run(test_prompt)
