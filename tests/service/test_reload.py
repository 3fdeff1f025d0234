#!/usr/bin/env python3
"""SIGHUP reloads the configuration file: a changed capacity applies as a
RESIZE, a new semaphore appears, one removed from the file is deleted once
idle, loglevel and requirepass apply at once, restart-only directives are
logged as ignored, and a file with an error is rejected whole with the
running configuration kept. Command-line overrides still win."""
import os
import signal
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from semdtest import *  # noqa: E402,F403

TMP = tempfile.mkdtemp(prefix="semdtest.")


def write(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def hup(d, mark):
    """SIGHUP, then wait for the reload's outcome line number mark+1."""
    os.kill(d.pid, signal.SIGHUP)
    return wait_until(lambda: d.log_text().count("received SIGHUP") > mark
                      and ("configuration reloaded" in d.log_text() or
                           "reload failed" in d.log_text()) and
                      (d.log_text().count("configuration reloaded") +
                       d.log_text().count("reload failed")) > mark)


BASE = """\
port 0
semaphore keep 2
semaphore idle 1
semaphore busy 1
"""


def test_reload():
    conf = os.path.join(TMP, "semd.conf")
    write(conf, BASE)
    d = start_semd("-c", conf)
    c = d.connect()
    expect(c, "INFO keep", "OK name=keep capacity=2 used=0 available=2 "
           "holders=0 waiters=0")
    h = d.connect()
    expect_token(h, "ACQUIRE busy")

    write(conf, """\
port 0   # a comment after a value
semaphore keep 5
semaphore new 3
loglevel debug
max-line 8192
""")
    ok(hup(d, 0), "SIGHUP: the reload is logged", d.log_text()[-500:])
    ok(d.alive(), "semd is alive after SIGHUP")
    expect(c, "INFO keep", "OK name=keep capacity=5 used=0 available=5 "
           "holders=0 waiters=0", "a changed capacity applies (RESIZE)")
    expect(c, "INFO new", "OK name=new capacity=3 used=0 available=3 "
           "holders=0 waiters=0", "a new semaphore appears")
    expect_err(c, "INFO idle", "NOSEM", "an idle semaphore removed from "
               "the file is deleted")
    expect(c, "INFO busy", "OK name=busy capacity=1 used=1 available=0 "
           "holders=1 waiters=0", "a busy one removed stays while held")
    text = d.log_text()
    ok("max-line changed; ignored until a restart" in text,
       "a restart-only directive is logged as ignored", text[-600:])
    ok("loglevel changed" in text, "loglevel is applied")
    c2 = d.connect()
    expect(c2, "PING", "OK PONG")
    ok(wait_until(lambda: " debug: connection " in d.log_text()),
       "loglevel debug applies at once (a connection is logged at debug)")
    expect(h, "RELEASE busy 1", "OK")
    ok(wait_until(lambda: c.cmd("INFO busy").startswith("ERR NOSEM")),
       "once released, the removed semaphore is deleted")

    # A broken file is rejected whole: nothing of it applies.
    write(conf, """\
port 0
semaphore keep 7
requirepass secret
semaphore broken x
""")
    ok(hup(d, 1), "SIGHUP with a broken file: the outcome is logged")
    text = d.log_text()
    ok("reload failed, the running configuration is kept" in text and
       "semaphore broken" in text, "the reason is logged", text[-400:])
    expect(c, "INFO keep", "OK name=keep capacity=5 used=0 available=5 "
           "holders=0 waiters=0", "the old capacity is kept")
    expect(d.connect(), "INFO keep", "OK name=keep capacity=5 used=0 "
           "available=5 holders=0 waiters=0",
           "no password from the broken file")

    # requirepass applies at once to new commands.
    write(conf, BASE.replace("semaphore idle 1\n", "") +
          "requirepass secret\n")
    ok(hup(d, 2), "SIGHUP with requirepass")
    n = d.connect()
    expect_err(n, "INFO keep", "AUTH", "requirepass applies at once")
    expect(n, "AUTH secret", "OK")
    expect(n, "INFO keep", "OK name=keep capacity=2 used=0 available=2 "
           "holders=0 waiters=0")

    # A reload that also sets loglevel notice still reports itself.
    before = d.log_text().count("configuration reloaded")
    write(conf, BASE + "requirepass secret\nloglevel notice\n"
          "semaphore extra 2\n")
    os.kill(d.pid, signal.SIGHUP)
    ok(wait_until(lambda: d.log_text().count("configuration reloaded") >
                  before, 20),
       "a reload setting loglevel notice still logs its report",
       d.log_text()[-600:])
    tail = d.log_text().split("configuration reloaded")[-2]
    ok("reload: loglevel changed" in tail.splitlines()[-1] or
       "reload: loglevel changed" in tail,
       "and says what changed (loglevel)", d.log_text()[-600:])
    d.stop()


def test_command_line_wins():
    conf = os.path.join(TMP, "cl.conf")
    write(conf, "semaphore s 2\n")
    d = start_semd("-c", conf, "--semaphore", "cli", "4")
    c = d.connect()
    write(conf, "semaphore s 3\n")
    ok(hup(d, 0), "reloaded")
    expect(c, "INFO s", "OK name=s capacity=3 used=0 available=3 "
           "holders=0 waiters=0", "the file's change applies")
    expect(c, "INFO cli", "OK name=cli capacity=4 used=0 available=4 "
           "holders=0 waiters=0", "a --semaphore override stays")
    d.stop()


run(test_reload, test_command_line_wins)
