#!/usr/bin/env python3
"""semd-cli, one command at a time: each subcommand's text and --json
output, durations, the exit codes (0 done, 1 not granted in time,
2 usage, 3 server error, 4 cannot connect), and the connection options
(-h -p -s -a and SEMD_* in the environment)."""
import json
import os
import re
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403


def jcli(port, *args):
    rc, out, err = cli(port, "--json", *args)
    try:
        return rc, json.loads(out)
    except ValueError:
        ok(False, "--json %s prints JSON" % " ".join(args), out + err)
        return rc, None


def test_commands_text():
    with start_semd("--semaphore", "jobs", "2") as d:
        p = d.port
        eq(cli(p, "ping")[:2], (0, "PONG\n"), "ping -> PONG")
        eq(cli(p, "create", "db", "3")[:2], (0, "OK\n"), "create db 3")
        eq(cli(p, "resize", "db", "2")[:2], (0, "OK\n"), "resize db 2")
        rc, tok, err = cli(p, "acquire", "db", "--lease", "60s")
        ok(rc == 0 and re.fullmatch(r"[0-9]+\n", tok),
           "acquire --lease 60s prints the token alone", (rc, tok, err))
        tok = tok.strip()
        rc, out, _ = cli(p, "check", "db", tok)
        m = re.fullmatch(r"n=1 kind=lease ttl_ms=([0-9]+)\n", out)
        ok(rc == 0 and m and 0 < int(m.group(1)) <= 60000,
           "check: n=1 kind=lease ttl_ms <= 60000", out)
        rc, out, _ = cli(p, "refresh", "db", tok, "5m")
        eq((rc, out), (0, "300000\n"), "refresh 5m -> 300000 (ms)")
        rc, out, _ = cli(p, "info", "db")
        eq((rc, out), (0, "name=db capacity=2 used=1 available=1 "
                       "holders=1 waiters=0 wait_p50_ms=0 wait_p99_ms=0 "
                       "grants_total=1 timeouts_total=0\n"),
           "info db: every key INFO sends")
        rc, out, _ = cli(p, "holders", "db")
        rows = out.splitlines()
        ok(rc == 0 and rows[0].split() == ["TOKEN", "N", "KIND", "OWNER",
                                           "TTL_MS", "NAME", "ADDR"] and
           rows[1].split()[:4] == [tok, "1", "lease", "-"] and
           rows[1].split()[5] == "-" and
           rows[1].split()[6].startswith("127.0.0.1:"),
           "holders: a header and one row, no name, the acquirer's "
           "address", out)
        rc, out, _ = cli(p, "waiters", "db")
        eq((rc, out.split()), (0, ["#", "N", "WAITED_MS", "OWNER", "NAME",
                                   "ADDR"]),
           "waiters: just the header")
        rc, out, _ = cli(p, "list")
        names = [ln.split()[0] for ln in out.splitlines()[1:]]
        eq((rc, names), (0, ["db", "jobs"]), "list: db and jobs")
        rc, out, _ = cli(p, "stats")
        ok(rc == 0 and "protocol=1.1\n" in out and "grants=1\n" in out,
           "stats: key=value lines", out)
        eq(cli(p, "try", "db", "-n", "2", "--lease", "1s")[0], 1,
           "try -n 2 when 1 is free: exit 1")
        rc, out, err = cli(p, "acquire", "db", "-n", "2", "--timeout",
                           "200ms", "--lease", "1s")
        eq((rc, out), (1, ""), "acquire --timeout 200ms not granted: "
           "exit 1, nothing on stdout")
        ok("not granted" in err, "and says so on stderr", err)
        eq(cli(p, "attach", "db", tok)[0], 3,
           "attach of a lease: exit 3 (ERR NOTLEASE)")
        eq(cli(p, "delete", "db")[0], 3, "delete with a holder: exit 3")
        eq(cli(p, "revoke", "db", tok)[:2], (0, "OK\n"), "revoke")
        eq(cli(p, "release", "db", tok)[0], 3,
           "release after revoke: exit 3 (ERR NOTHELD)")
        eq(cli(p, "delete", "db")[:2], (0, "OK\n"), "delete db")
        rc, out, err = cli(p, "info", "db")
        eq(rc, 3, "info of a deleted semaphore: exit 3")
        ok("no semaphore" in err and "(ERR NOSEM)" in err,
           "semd's text and code on stderr", err)
        eq(cli(p, "quit")[:2], (0, "OK\n"), "quit")
        eq(d.connect().info("jobs")["used"], "0", "nothing held")


def test_commands_json():
    with start_semd("--semaphore", "jobs", "2") as d:
        p = d.port
        eq(jcli(p, "ping"), (0, {"ok": True}), "--json ping")
        rc, j = jcli(p, "acquire", "jobs", "--lease", "1m")
        ok(rc == 0 and isinstance(j.get("token"), int),
           "--json acquire -> {\"token\": N}", j)
        tok = j["token"]
        eq(jcli(p, "info", "jobs"), (0, {
            "name": "jobs", "capacity": 2, "used": 1, "available": 1,
            "holders": 1, "waiters": 0, "wait_p50_ms": 0, "wait_p99_ms": 0,
            "grants_total": 1, "timeouts_total": 0}), "--json info")
        rc, j = jcli(p, "check", "jobs", str(tok))
        ok(rc == 0 and j["n"] == 1 and j["kind"] == "lease" and
           0 < j["ttl_ms"] <= 60000, "--json check", j)
        rc, j = jcli(p, "holders", "jobs")
        ok(rc == 0 and len(j) == 1 and j[0]["token"] == tok and
           j[0]["owner"] is None and j[0]["kind"] == "lease",
           "--json holders: an array, owner null for a lease", j)
        eq(jcli(p, "waiters", "jobs"), (0, []), "--json waiters: []")
        rc, j = jcli(p, "list")
        eq((rc, [s["name"] for s in j]), (0, ["jobs"]), "--json list")
        rc, j = jcli(p, "stats")
        ok(rc == 0 and j["protocol"] == "1.1" and j["persistence"] == "off",
           "--json stats: numbers as numbers, words as strings", j)
        eq(jcli(p, "refresh", "jobs", str(tok), "30s"),
           (0, {"ttl_ms": 30000}), "--json refresh")
        rc, j = jcli(p, "info", "nosuch")
        ok(rc == 3 and j["error"] == "NOSEM" and "nosuch" in j["message"],
           "--json error: {\"error\": \"NOSEM\", \"message\": ...}", j)
        rc, j = jcli(p, "try", "jobs", "-n", "2", "--lease", "1s")
        ok(rc == 1 and j["error"] == "TIMEOUT", "--json try: TIMEOUT", j)
        rc, out, _ = cli(p, "release", "jobs", str(tok), "--json")
        eq((rc, out), (0, '{"ok":true}\n'), "--json after the command")


def test_usage():
    p = free_port()
    for args, why in [(("frobnicate",), "an unknown command"),
                      (("info",), "a missing argument"),
                      (("info", "a", "b"), "an extra argument"),
                      (("acquire", "jobs"), "acquire without --lease"),
                      (("acquire", "jobs", "--lease", "5x"),
                       "a bad duration"),
                      (("acquire", "jobs", "--lease", "25d"),
                       "a duration with an unknown unit"),
                      (("acquire", "jobs", "--lease", "3000000s"),
                       "a duration over 2^31-1 ms"),
                      (("acquire", "jobs", "-n", "0", "--lease", "1s"),
                       "-n 0"),
                      (("release", "jobs", "12x"), "a bad token"),
                      (("create", "jobs", "0"), "create with capacity 0"),
                      (("info", "bad name!"), "an invalid name"),
                      (("run", "jobs", "true"), "run without --"),
                      (("run", "jobs", "--"), "run without a command"),
                      (("-x", "ping"), "an unknown option"),
                      (("-p", "99999", "ping"), "a bad port")]:
        rc, out, err = cli(None, *args, env={"SEMD_PORT": str(p)})
        ok(rc == 2 and err.startswith("semd-cli: "),
           "exit 2 for %s" % why, (rc, out, err))
    rc, out, err = cli(None, env={"SEMD_PORT": str(p)})
    eq((rc, out, err), (0, "", ""), "no command and stdin /dev/null: "
       "commands from it, none (a pipe of none), exit 0")
    rc, out, _ = cli(None, "--help")
    ok(rc == 0 and "usage: semd-cli" in out and "exit status" in out,
       "--help: usage and exit statuses", out)


def test_connection_options():
    eq(cli(free_port(), "ping")[0], 4, "nobody listening: exit 4")
    eq(cli(None, "-h", "no-such-host.invalid", "ping")[0], 4,
       "an unknown host: exit 4")
    sock = os.path.join(tempfile.mkdtemp(prefix="semdtest."), "s.sock")
    with start_semd("--semaphore", "jobs", "2", "--requirepass", "pw",
                    "--unixsocket", sock) as d:
        eq(cli(d.port, "info", "jobs")[0], 3, "no password: exit 3")
        eq(cli(d.port, "-a", "pw", "info", "jobs")[0], 0, "-a PASSWORD")
        eq(cli(None, "info", "jobs", env={
            "SEMD_PORT": str(d.port), "SEMD_PASSWORD": "pw"})[0], 0,
           "SEMD_PORT and SEMD_PASSWORD")
        eq(cli(None, "-s", sock, "-a", "pw", "ping")[:2], (0, "PONG\n"),
           "-s SOCKET")
        eq(cli(None, "ping", env={"SEMD_SOCKET": sock})[:2],
           (0, "PONG\n"), "SEMD_SOCKET")
        eq(cli(None, "-a", "wrong", "-p", str(d.port), "ping")[0], 3,
           "a wrong password: exit 3")


run(test_commands_text, test_commands_json, test_usage,
    test_connection_options)
