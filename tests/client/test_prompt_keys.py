#!/usr/bin/env python3
"""The prompt under a pseudo-terminal that is its controlling terminal,
as in a shell: Ctrl-C cancels a waiting acquire (the prompt and the
permits it holds stay; semd forgets the waiter), Ctrl-C drops the line
being typed and does not leave, Ctrl-D leaves; help; the history file is
written after every line (SEMD_CLI_HISTFILE, /dev/null for none)."""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403
import ptyterm  # noqa: E402


class Term(ptyterm.Term):
    """semd-cli on a pty that is its controlling terminal, so Ctrl-C
    (\\x03) reaches it as SIGINT from the terminal."""

    def __init__(self, argv, env):
        super().__init__(argv, env, ctty=True)

    def ctrl_d(self):
        """Ctrl-D, at once after the prompt is drawn (libedit may not
        have put the terminal in raw mode yet); semd-cli's exit status,
        None if it is still running 10 s later."""
        self.key("\x04")
        try:
            return self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None


def holders(c):
    return sorted(h["token"] for h in c.listing("HOLDERS jobs"))


def test_ctrl_c():
    home = tempfile.mkdtemp(prefix="semdtest.")
    hist = os.path.join(home, "hist")
    with start_semd("--semaphore", "jobs", "2") as d:
        env = dict(client_env(), HOME=home, TERM="dumb",
                   SEMD_CLI_HISTFILE=hist)
        t = Term(cli_argv(d.port), env)
        prompt = "semd 127.0.0.1:%d> " % d.port
        try:
            ok(t.at_prompt(prompt), "the prompt shows", t.text)
            t.send("acquire jobs")
            m = t.read_re(r"\n([0-9]+)\r?\n")
            ok(m, "acquire at the prompt prints the token", t.text)
            mine = m.group(1) if m else "?"
            c = d.connect()
            other = c.cmd("ACQUIRE jobs")
            ok(other.startswith("OK "), "another client takes the last "
               "permit", other)
            other = other.split()[1]

            t.send("acquire jobs")
            ok(wait_until(lambda: len(c.listing("WAITERS jobs")) == 1, 10),
               "the prompt's acquire waits (WAITERS has it)")
            t.key("\x03")
            ok(t.read_until("cancelled") and t.at_prompt(prompt),
               "Ctrl-C cancels it and the prompt comes back", t.text)
            ok(t.p.poll() is None, "semd-cli is still running")
            ok(wait_until(lambda: c.listing("WAITERS jobs") == [], 10),
               "WAITERS is empty after the cancel")
            eq(holders(c), sorted([mine, other]),
               "the permit acquired earlier at the prompt is still held")
            t.send("holders jobs")
            ok(t.read_re(r"\n%s +1 conn" % mine),
               "holders at the prompt still works", t.text)
            t.send("watch jobs %s" % other)
            ok(wait_until(lambda: any(
                r.get("cmd") == "watch" and r.get("waiting") == "1"
                for r in c.listing("CLIENTS")), 10),
               "watch at the prompt waits")
            t.key("\x03")
            ok(t.read_until("watch cancelled") and t.at_prompt(prompt),
               "Ctrl-C cancels a watch too", t.text)
            ok(wait_until(lambda: not any(
                r.get("cmd") == "watch" for r in c.listing("CLIENTS")), 10),
               "its connection is gone")
            eq(holders(c), sorted([mine, other]), "nothing released")

            t.send("acquire jobs")
            ok(wait_until(lambda: len(c.listing("WAITERS jobs")) == 1, 10),
               "a second acquire waits")
            eq(c.cmd("RELEASE jobs %s" % other), "OK",
               "the other client releases")
            m = t.read_re(r"\n([0-9]+)\r?\n")
            ok(m, "the waiting acquire is granted and prints its token",
               t.text)
            late = m.group(1) if m else "?"
            eq(holders(c), sorted([mine, late]),
               "both permits of the prompt are held")
            t.send("release jobs %s" % late)
            ok(t.read_until("OK") and t.at_prompt(prompt),
               "the permit granted after a wait is released at the prompt",
               t.text)
            eq(holders(c), [mine], "only the first permit is left")

            t.key("\x03")
            ok(t.read_until("^C") and t.at_prompt(prompt),
               "Ctrl-C at an empty prompt: a new prompt", t.text)
            t.key("pin\x03")
            ok(t.read_until("^C") and t.at_prompt(prompt),
               "Ctrl-C drops a half-typed line", t.text)
            t.send("ping")
            ok(t.read_until("PONG") and t.at_prompt(prompt) and
               "pinping" not in t.text,
               "the prompt goes on, the dropped line forgotten", t.text)
            ok(t.p.poll() is None, "Ctrl-C never left the prompt")
            eq(holders(c), [mine], "the permit is still held")

            t.send("help")
            ok(t.read_until("prompt ends") and "acquire SEM" in t.text and
               "Ctrl-C" in t.text and "quit" in t.text,
               "help lists the prompt's commands and keys", t.text)
            t.send("help try")
            ok(t.read_until("usage: try SEM") and t.at_prompt(prompt),
               "help try explains one", t.text)

            with open(hist) as f:
                text = f.read()
            ok("help\\040try" in text or "help try" in text,
               "the history file has the last line before leaving", text)
            eq(t.ctrl_d(), 0, "Ctrl-D leaves, exit 0")
            ok(wait_until(lambda: holders(c) == [], 10),
               "leaving frees the prompt's permit")
        finally:
            t.close()


def test_no_history():
    home = tempfile.mkdtemp(prefix="semdtest.")
    with start_semd("--semaphore", "jobs", "2") as d:
        env = dict(client_env(), HOME=home, TERM="dumb",
                   SEMD_CLI_HISTFILE="/dev/null")
        t = Term(cli_argv(d.port), env)
        try:
            ok(t.read_until("> "), "the prompt shows", t.text)
            t.send("ping")
            ok(t.read_until("PONG"), "ping", t.text)
            t.send("quit")
            eq(t.p.wait(timeout=10), 0, "quit leaves")
            eq(os.listdir(home), [], "SEMD_CLI_HISTFILE=/dev/null: no "
               "history file")
        finally:
            t.close()
        env = dict(client_env(), HOME=home, TERM="dumb")
        t = Term(cli_argv(d.port), env)
        try:
            ok(t.read_until("> "), "the prompt shows", t.text)
            t.send("info jobs")
            ok(t.read_until("capacity=2"), "info", t.text)
            with open(os.path.join(home, ".semd_cli_history")) as f:
                text = f.read()
            ok("info" in text, "by default ~/.semd_cli_history, written "
               "while the prompt runs", text)
        finally:
            t.close()


run(test_ctrl_c, test_no_history, time_limit=120)
