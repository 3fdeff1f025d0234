#!/usr/bin/env python3
"""semd-cli as flock(1) and redis-cli users expect: durations (a bare
number is seconds; 1.5s, 250ms), the protocol's own words as well as the
options (ACQUIRE jobs 2 TIMEOUT 100), help CMD and CMD --help, and
commands read from a pipe (one a line, replies in order, the exit status
of the worst)."""
import os
import json
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403


def timed(port, *args):
    t0 = time.monotonic()
    rc, out, err = cli(port, *args)
    return rc, out, err, time.monotonic() - t0


def ttl_of(c, sem, token):
    r = c.cmd("CHECK %s %s" % (sem, token))
    m = re.search(r"ttl_ms=([0-9]+)", r)
    return int(m.group(1)) if m else None


def test_durations():
    with start_semd("--semaphore", "one", "1") as d:
        p = d.port
        c = d.connect()
        rc, tok, _ = cli(p, "acquire", "one", "--lease", "60")
        eq(rc, 0, "acquire --lease 60")
        ttl = ttl_of(c, "one", tok.strip())
        ok(ttl is not None and 50000 < ttl <= 60000,
           "--lease 60 is 60 seconds (ttl_ms %s)" % ttl)
        rc, out, err, took = timed(p, "acquire", "one", "--timeout", "1",
                                   "--lease", "10")
        ok(rc == 1 and took >= 0.9,
           "--timeout 1 waits about a second, not 1 ms (exit %d after "
           "%.3f s)" % (rc, took), err)
        rc, out, err, took = timed(p, "acquire", "one", "--timeout", "1.5s",
                                   "--lease", "10")
        ok(rc == 1 and took >= 1.4,
           "--timeout 1.5s waits 1.5 s (%.3f s)" % took, err)
        rc, out, err, took = timed(p, "acquire", "one", "--timeout",
                                   "250ms", "--lease", "10")
        ok(rc == 1 and 0.2 <= took < 20,
           "--timeout 250ms waits 250 ms (%.3f s)" % took, err)
        rc, out, err, took = timed(p, "acquire", "one", "--timeout=0.3",
                                   "--lease", "10")
        ok(rc == 1 and 0.25 <= took < 20,
           "--timeout=0.3: a fraction of a second (%.3f s)" % took, err)
        eq(cli(p, "release", "one", tok.strip())[0], 0, "release")
        rc, tok, _ = cli(p, "try", "one", "--lease", "1.5s")
        ttl = ttl_of(c, "one", tok.strip())
        ok(rc == 0 and ttl is not None and 1000 < ttl <= 1500,
           "--lease 1.5s (ttl_ms %s)" % ttl)
        rc, out, _ = cli(p, "refresh", "one", tok.strip(), "5")
        eq((rc, out), (0, "5000\n"),
           "refresh's D is a duration as typed anywhere: 5 is 5 s")
        rc, out, _ = cli(p, "REFRESH", "one", tok.strip(), "5000")
        eq((rc, out), (0, "5000\n"),
           "REFRESH in the protocol's spelling: 5000 is its <ms>")
        rc, out, _ = cli(p, "refresh", "one", tok.strip(), "1500ms")
        eq((rc, out), (0, "1500\n"), "refresh 1500ms")
        rc, out, _ = cli(p, "refresh", "one", tok.strip(), "2m")
        eq((rc, out), (0, "120000\n"), "refresh 2m")
        for bad in ["1.5x", "x", "", "-1", "1.", ".5", "1 s", "3000000s",
                    "25d", "1e3"]:
            rc, out, err = cli(p, "acquire", "one", "--timeout", bad,
                               "--lease", "10")
            ok(rc == 2 and "invalid duration" in err and
               "'%s'" % bad in err,
               "--timeout %r refused: exit 2 and says why" % bad,
               (rc, out, err))
        rc, out, err = cli(p, "acquire", "one", "--lease", "10",
                           "TIMEOUT", "1.5x")
        ok(rc == 2 and "invalid duration" in err and "TIMEOUT" in err,
           "TIMEOUT 1.5x refused", (rc, err))
        rc, out, err = cli(p, "refresh", "one", tok.strip(), "soon")
        ok(rc == 2 and "invalid duration 'soon'" in err,
           "refresh with a bad duration refused", (rc, err))
        eq(c.info("one")["used"], "1", "nothing else was granted")


def test_protocol_words():
    with start_semd("--semaphore", "jobs", "3") as d:
        p = d.port
        c = d.connect()
        rc, tok, err = cli(p, "acquire", "jobs", "2", "--lease", "1m")
        ok(rc == 0 and re.fullmatch(r"[0-9]+\n", tok),
           "acquire jobs 2 --lease 1m", (rc, tok, err))
        r = c.cmd("CHECK jobs %s" % tok.strip())
        m = re.fullmatch(r"OK n=2 kind=lease ttl_ms=([0-9]+)", r)
        ok(m and 50000 < int(m.group(1)) <= 60000,
           "n=2, a lease of one minute", r)
        rc, out, err, took = timed(p, "ACQUIRE", "jobs", "2", "TIMEOUT",
                                   "300", "LEASE", "60000")
        ok(rc == 1 and 0.25 <= took < 20,
           "ACQUIRE jobs 2 TIMEOUT 300 LEASE 60000: TIMEOUT is in ms "
           "(%.3f s)" % took, err)
        rc, tok2, err = cli(p, "ACQUIRE", "jobs", "TIMEOUT", "100", "LEASE",
                            "60000")
        eq(rc, 0, "ACQUIRE jobs TIMEOUT 100 LEASE 60000")
        ttl = ttl_of(c, "jobs", tok2.strip())
        ok(ttl is not None and 50000 < ttl <= 60000,
           "LEASE 60000 is 60000 ms (ttl_ms %s)" % ttl)
        eq(cli(p, "release", "jobs", tok2.strip())[0], 0, "release")
        rc, tok3, err = cli(p, "Try", "jobs", "1", "lease", "2s")
        ttl = ttl_of(c, "jobs", tok3.strip())
        ok(rc == 0 and ttl is not None and 1000 < ttl <= 2000,
           "Try jobs 1 lease 2s: keywords in any case, a unit allowed",
           (rc, tok3, err, ttl))
        eq(cli(p, "release", "jobs", tok3.strip())[0], 0, "release")
        rc, tok3, err = cli(p, "try", "jobs", "1", "lease", "2")
        ttl = ttl_of(c, "jobs", tok3.strip())
        ok(rc == 0 and ttl is not None and 1000 < ttl <= 2000,
           "try jobs 1 lease 2: not the protocol's upper case, so a bare "
           "number is seconds", (rc, tok3, err, ttl))
        rc, out, err = cli(p, "acquire", "jobs", "2", "-n", "3", "--lease",
                           "1")
        ok(rc == 2 and "twice" in err, "a count given twice, differently: "
           "exit 2", (rc, err))
        rc, out, err = cli(p, "acquire", "jobs", "--lease", "1", "TIMEOUT")
        eq(rc, 2, "TIMEOUT without its value: exit 2")
        eq(cli(p, "create", "timeout", "1")[0], 0,
           "a semaphore named timeout")
        rc, out, err = cli(p, "acquire", "timeout", "LEASE", "5000")
        ok(rc == 0 and ttl_of(c, "timeout", out.strip()) is not None,
           "acquire timeout LEASE 5000: the first word is the name",
           (rc, out, err))
        rc, out, err = cli(p, "acquire", "jobs", "x", "--lease", "1")
        ok(rc == 3 and "ERR NOSEM" in err, "a word that is no count names "
           "a second semaphore (ACQUIREALL): x is unknown, exit 3",
           (rc, err))
        rc, out, err = cli(p, "acquire", "timeout", "jobs", "--lease", "1")
        ok(rc == 2 and "keyword" in err, "a keyword cannot be one of "
           "several names: exit 2", (rc, err))


def test_help():
    rc, out, err = cli(None, "help", "acquire")
    ok(rc == 0 and out.startswith("usage: acquire SEM") and
       "TIMEOUT" in out and "seconds" in out,
       "help acquire: usage, durations and the protocol's words", out)
    eq(cli(None, "acquire", "--help")[:2], (0, out),
       "acquire --help says the same")
    eq(cli(None, "ACQUIRE", "jobs", "--help")[:2], (0, out),
       "... also after arguments")
    rc, out, err = cli(None, "run", "--help")
    ok(rc == 0 and out.startswith("usage: run SEM"), "run --help", out)
    rc, out, err = cli(None, "help", "frobnicate")
    ok(rc == 2 and "unknown command" in err, "help of an unknown command: "
       "exit 2", (rc, err))
    rc, out, err = cli(None, "help")
    ok(rc == 0 and "usage: semd-cli" in out and "help COMMAND" in out,
       "help: the usage", out)


def test_pipe():
    with start_semd("--semaphore", "jobs", "2", "--semaphore", "t",
                    "1") as d:
        p = d.port
        c = d.connect()
        rc, out, err = cli(p, input="ping\ninfo jobs\n# a comment\n\n"
                           "acquire jobs\nholders jobs\n")
        lines = out.splitlines()
        ok(rc == 0 and len(lines) == 5 and lines[0] == "PONG" and
           lines[1].startswith("name=jobs capacity=2 used=0") and
           re.fullmatch(r"[0-9]+", lines[2]) and
           lines[3].split()[0] == "TOKEN" and
           lines[4].split()[:3] == [lines[2], "1", "conn"],
           "replies in order; a permit without --lease is held by the "
           "pipe's connection", (rc, out, err))
        ok(wait_until(lambda: c.info("jobs")["used"] == "0", 10),
           "and released when the input ends")
        rc, out, err = cli(p, input="ping\nfrobnicate\ninfo jobs\n")
        ok(rc == 2 and out.startswith("PONG\n(error) ERR unknown command "
                                      "'frobnicate'\nname=jobs") and
           "unknown command 'frobnicate'" in err,
           "a bad line in the middle: its error in place on stdout (as "
           "redis-cli) and on stderr, the next runs, exit 2",
           (rc, out, err))
        rc, out, err = cli(p, input="info nosuch\nfrobnicate\nping\n")
        eq((rc, out), (3, "(error) ERR NOSEM no semaphore 'nosuch'\n"
                       "(error) ERR unknown command 'frobnicate'\nPONG\n"),
           "a server error is worse than a usage error: exit 3; each "
           "error in place on stdout")
        rc, out, err = cli(p, input="try t LEASE 60000\n"
                           "try t LEASE 60000\nping\n")
        eq(rc, 1, "not granted is worse than done: exit 1")
        rc, out, err = cli(p, input="try t LEASE 60000\nping\n"
                           "info nosuch\n")
        eq(rc, 3, "the worst, not the last")
        rc, out, err = cli(p, input="ping\nquit\nping\n")
        eq((rc, out), (0, "PONG\n"), "quit ends the input")
        rc, out, err = cli(p, input="run jobs -- true\nping\n")
        ok(rc == 2 and out.endswith("\nPONG\n") and
           out.startswith("(error) ERR run: not from a pipe") and
           "pipe" in err,
           "run is refused from a pipe", (rc, out, err))
        rc, out, err = cli(p, input="")
        eq((rc, out), (0, ""), "no input: nothing done, exit 0")
        rc, out, err = cli(p, input="ping " + "x" * 10000 + "\nping\n")
        ok(rc == 2 and out == "(error) ERR a line longer than 8190 bytes\n"
           "PONG\n" and "longer than" in err,
           "a line too long is refused, the next runs", (rc, out, err))
        rc, out, err = cli(p, "--json", input="ping\ninfo jobs\n")
        ok(rc == 0 and out.splitlines()[0] == '{"ok":true}' and
           out.splitlines()[1].startswith('{"name":"jobs"'),
           "--json: one JSON value a line", out)
        rc, out, err = cli(p, input="ACQUIRE jobs 2 TIMEOUT 100\n"
                           "INFO jobs\n")
        ok(rc == 0 and "used=2" in out, "the protocol's words in a pipe",
           (rc, out, err))
    rc, out, err = cli(free_port(), input="ping\nping\n")
    eq(rc, 4, "nobody listening: exit 4")
    ok(out.count("(error) ERR CONNECT ") == 2 and len(out.splitlines()) == 2,
       "nobody listening: one (error) line per command", out)


def jcli(port, *args):
    rc, out, err = cli(port, "--json", *args)
    try:
        return rc, json.loads(out)
    except ValueError:
        ok(False, "--json %s prints JSON" % " ".join(args), out + err)
        return rc, None


def test_role_name_info_keys():
    with start_semd("--semaphore", "jobs", "2") as d:
        p = d.port
        c = d.connect()
        raw = c.cmd("ROLE")
        eq(cli(p, "role")[:2], (0, raw[len("OK "):] + "\n"),
           "semd-cli role: every key ROLE sends (%s)" % raw)
        rc, j = jcli(p, "role")
        ok(rc == 0 and j["role"] == "single" and j["epoch"] == 0 and
           j["owner"] == "-" and len(j) == len(raw.split()) - 1,
           "semd-cli --json role: every key, numbers as numbers", j)
        raw = c.cmd("INFO jobs")
        want = dict(w.split("=", 1) for w in raw.split()[1:])
        rc, out, err = cli(p, "info", "jobs")
        got = dict(w.split("=", 1) for w in out.split())
        ok(rc == 0 and got == want and "wait_p99_ms" in got and
           "timeouts_total" in got and "grants_total" in got,
           "info shows every key INFO sends", (out, raw))
        rc, j = jcli(p, "info", "jobs")
        ok(rc == 0 and set(j) == set(want) and j["wait_p50_ms"] == 0,
           "--json info: every key, numbers as numbers", j)
        rc, out, err = cli(p, input="name batch-7\ntry jobs\n"
                           "clients\nbogus-only\n")
        lines = out.splitlines()
        ok(rc == 2 and lines[0] == "OK" and
           any("batch-7" in ln for ln in lines) and
           lines[-1].startswith("(error) ERR unknown command"),
           "name LABEL labels the pipe's connection (clients shows it)",
           (rc, out, err))
        rc, out, err = cli(p, "name", "bad label!")
        ok(rc != 0 and "(error)" not in out,
           "a bad label refused; on the command line errors stay on "
           "stderr", (rc, out, err))


def test_clients_kill_watch():
    with start_semd("--semaphore", "jobs", "2") as d:
        p = d.port
        c = d.connect()
        c.cmd("NAME watcher-test")
        rc, out, err = cli(p, "--name", "ops@box1", "clients")
        rows = [r.split() for r in out.splitlines()]
        ok(rc == 0 and rows[0] == ["ID", "ADDR", "NAME", "AGE_MS",
                                   "IDLE_MS", "GRANTS", "WAITING", "CMD"],
           "clients: a header", out)
        me = [r for r in rows[1:] if r[2] == "ops@box1"]
        ok(len(me) == 1 and me[0][1].startswith("127.0.0.1:") and
           me[0][7] == "clients", "--name is sent with NAME on connect: "
           "the row of semd-cli itself", out)
        other = [r for r in rows[1:] if r[2] == "watcher-test"]
        ok(len(other) == 1 and other[0][6] == "no",
           "another connection, by its NAME", out)
        rc, out, err = cli(p, "clients", env={"SEMD_NAME": "env@box2"})
        ok(rc == 0 and " env@box2 " in out, "SEMD_NAME", out)
        rc, out, err = cli(p, "clients")
        ok(rc == 0 and " ops@box1 " not in out and
           [r.split()[2] for r in out.splitlines()[1:]
            if r.split()[7] == "clients"] == ["-"],
           "without --name, no NAME", out)
        rc, out, err = cli(p, "--name", "bad name", "ping")
        ok(rc == 2 and "invalid name" in err, "a bad --name: exit 2", err)
        rc, out, err = cli(p, "--json", "--name", "j@x", "clients")
        j = json.loads(out)
        mine = [x for x in j if x["name"] == "j@x"]
        ok(rc == 0 and len(mine) == 1 and mine[0]["waiting"] is False and
           mine[0]["cmd"] == "clients" and
           mine[0]["addr"].startswith("127.0.0.1:") and
           isinstance(mine[0]["id"], int),
           "--json clients: an array of objects", out)

        rc, tok, err = cli(p, "--name", "holder@h1", "acquire", "jobs",
                           "--lease", "60")
        tok = tok.strip()
        rc, out, err = cli(p, "holders", "jobs")
        row = out.splitlines()[1].split()
        ok(row[0] == tok and row[5] == "holder@h1" and
           row[6].startswith("127.0.0.1:"),
           "holders shows the acquirer's name and address", out)

        w = subprocess.Popen(cli_argv(p, "watch", "jobs", tok),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=client_env())
        ok(wait_until(lambda: any(
            r.get("cmd") == "watch" and r.get("waiting") == "1"
            for r in c.listing("CLIENTS")), 10), "watch waits")
        eq(cli(p, "revoke", "jobs", tok)[:2], (0, "OK\n"), "revoke")
        out, err = w.communicate(timeout=10)
        eq((w.returncode, out.decode()), (0, "revoked\n"),
           "watch prints revoked, exit 0")
        rc, out, err = cli(p, "watch", "jobs", tok)
        ok(rc == 3 and "NOTHELD" in err, "watch of a token not held: "
           "exit 3 at once", (rc, err))
        rc, tok, err = cli(p, "try", "jobs", "--lease", "60")
        tok = tok.strip()
        rc, out, err, took = timed(p, "watch", "jobs", tok, "--timeout",
                                   "0.5")
        ok(rc == 1 and out == "" and "still held" in err and took >= 0.45,
           "watch --timeout 0.5: still held, exit 1 after half a second "
           "(%.3f s)" % took, (rc, out, err))
        rc, out, err, took = timed(p, "WATCH", "jobs", tok, "TIMEOUT", "300")
        ok(rc == 1 and 0.25 <= took < 20,
           "WATCH jobs TOKEN TIMEOUT 300: in ms (%.3f s)" % took, err)
        rc, out, err = cli(p, "--json", "watch", "jobs", tok, "--timeout",
                           "100ms")
        eq((rc, json.loads(out)["error"]), (1, "TIMEOUT"),
           "--json watch that times out")
        w = subprocess.Popen(cli_argv(p, "--json", "watch", "jobs", tok),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=client_env())
        ok(wait_until(lambda: any(
            r.get("cmd") == "watch" and r.get("waiting") == "1"
            for r in c.listing("CLIENTS")), 10), "a second watch waits")
        eq(cli(p, "release", "jobs", tok)[0], 0, "release")
        out, err = w.communicate(timeout=10)
        eq((w.returncode, json.loads(out.decode())), (0, {"reason":
                                                          "released"}),
           "--json watch: {\"reason\": \"released\"}")

        k = d.connect()
        k.cmd("NAME victim")
        tok = k.cmd("ACQUIRE jobs").split()[1]
        victim = [r["id"] for r in c.listing("CLIENTS")
                  if r.get("name") == "victim"]
        eq(len(victim), 1, "the victim's id from CLIENTS")
        w = subprocess.Popen(cli_argv(p, "watch", "jobs", tok),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=client_env())
        ok(wait_until(lambda: any(
            r.get("cmd") == "watch" and r.get("waiting") == "1"
            for r in c.listing("CLIENTS")), 10), "a watch of its permit")
        eq(cli(p, "kill", victim[0])[:2], (0, "OK\n"), "kill ID")
        out, err = w.communicate(timeout=10)
        eq((w.returncode, out.decode()), (0, "closed\n"),
           "the watch says closed")
        ok(k.expect_closed(), "the victim's connection is "
           "closed")
        eq(c.info("jobs")["used"], "0", "its bound permit is released")
        rc, out, err = cli(p, "kill", victim[0])
        ok(rc == 3 and "NOCONN" in err, "kill of an id not open: exit 3",
           (rc, err))
        rc, out, err = cli(p, "kill", "abc")
        eq(rc, 2, "kill abc: exit 2")
        rc, out, err = cli(p, "--json", "kill", victim[0])
        eq((rc, json.loads(out)["error"]), (3, "NOCONN"), "--json kill")


run(test_durations, test_protocol_words, test_help, test_pipe,
    test_role_name_info_keys,
    test_clients_kill_watch, time_limit=120)
