#!/usr/bin/env python3
"""Clients follow a failover: two real semd on one private Redis, the
first the owner, the second a standby; the clients are given both
addresses; the owner is killed with kill -9. libsemc finds the new owner,
re-ATTACHes its bound permit there (HOLDERS shows it owned, not
unowned) and serves a TRY; a lease kept by semc_keeper stays held;
`semd-cli -h A,B try --lease` started right
after the kill succeeds once the standby has taken over; `semd-cli run`
keeps its command's permit across the failover."""
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403
from redistest import start_redis, start_semd_redis, run, redis_tokens  # noqa: E402,E501

OWNER_LEASE = "1s"      # takeover within owner-lease + 1 s
GRACE = "10s"           # reclaim-grace: the default


def daemon_has_standby():
    """The daemon side of failover: semd -t accepts `standby yes`."""
    status, out, err = run_semd("--standby", "yes", "--persistence", "sync",
                                "--redis", "127.0.0.1:1", "-t")
    return status == 0


def pair(r):
    """An owner, then a standby on the same Redis data set."""
    args = ("--semaphore", "jobs", "3", "--owner-lease", OWNER_LEASE)
    a = start_semd_redis(r, *args, grace=GRACE)
    b = start_semd_redis(r, *(args + ("--standby", "yes")), grace=GRACE)
    ca, cb = a.connect(), b.connect()
    match(ca.cmd("ROLE"), r"OK role=owner .*",
          "the first semd is the owner")
    match(cb.cmd("ROLE"), r"OK role=standby .*owner=127\.0\.0\.1:%d( .*)?"
          % a.port, "the second is its standby, naming it")
    return a, b, "127.0.0.1:%d,127.0.0.1:%d" % (a.port, b.port)


def owned(c, token):
    """The HOLDERS row of token on c's semd (or None)."""
    for h in c.listing("HOLDERS jobs"):
        if h["token"] == str(token):
            return h
    return None


def read_until(p, word):
    while True:
        ln = p.stdout.readline().decode()
        relay(ln, "semc_api")
        if not ln or ln.startswith(word):
            return ln


def test_library():
    with start_redis() as r:
        a, b, hosts = pair(r)
        p = subprocess.Popen([SEMC_API, "failover", hosts],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=client_env())
        ln = read_until(p, "token")
        ok(ln.startswith("token "), "semc_api holds a bound permit", ln)
        token = int(ln.split()[1]) if ln.startswith("token ") else 0
        h = owned(a.connect(), token)
        ok(h is not None and h["owner"] != "-", "the owner has it bound",
           h)
        a.kill9()
        p.stdin.write(b"go\n")
        p.stdin.flush()
        ok(read_until(p, "attached").startswith("attached"),
           "libsemc followed the failover")
        cb = b.connect()
        match(cb.cmd("ROLE"), r"OK role=owner .*", "the standby took over")
        h = owned(cb, token)
        ok(h is not None and h["owner"] != "-" and h["kind"] == "conn",
           "HOLDERS on the new owner: the permit is bound to libsemc's "
           "new connection, not unowned", h)
        out, err = p.communicate(b"go\n", timeout=60)
        relay(out.decode(), "semc_api")
        no_sanitizer_report(err.decode(), "semc_api failover")
        eq(p.returncode, 0, "semc_api failover exits 0")
        leases = [ln for ln in out.decode().splitlines()
                  if ln.startswith("lease ")]
        ok(leases and int(leases[0].split()[1]) > token, "the new owner's "
           "token is above the old owner's", leases)
        eq([h["kind"] for h in cb.listing("HOLDERS jobs")], ["lease"],
           "the bound permit was released; the lease is held")


def test_keeper():
    """A lease kept by semc_keeper survives the failover by itself; the
    keeper's own connection follows the new owner."""
    with start_redis() as r:
        a, b, hosts = pair(r)
        p = subprocess.Popen([SEMC_API, "keeperfail", hosts],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=client_env())
        ok(read_until(p, "lease").startswith("lease"), "a kept lease")
        a.kill9()
        out, err = p.communicate(b"go\n", timeout=60)
        relay(out.decode(), "semc_api")
        no_sanitizer_report(err.decode(), "semc_api keeperfail")
        eq(p.returncode, 0, "semc_api keeperfail exits 0")


def test_cli():
    tmp = tempfile.mkdtemp(prefix="semdtest.")
    gate = os.path.join(tmp, "gate")
    errpath = os.path.join(tmp, "stderr")
    with start_redis() as r:
        a, b, hosts = pair(r)
        with open(errpath, "wb") as errf:
            run_p = subprocess.Popen(
                cli_argv(None, "-h", hosts, "run", "jobs", "--", "sh", "-c",
                         "while [ ! -e %s ]; do sleep 0.05; done; exit 5"
                         % gate), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=errf, env=client_env())

        def said(text):
            with open(errpath) as f:
                return text in f.read()

        ca = a.connect()
        ok(wait_until(lambda: ca.info("jobs")["used"] == "1", 10),
           "run holds its permit on the owner")
        token = ca.listing("HOLDERS jobs")[0]["token"]
        # The grant is answered once Redis has it (persistence sync): a
        # kill before that would lose run's reply, as it should.
        ok(wait_until(lambda: int(token) in redis_tokens(r, "jobs"), 10),
           "run's grant is in Redis, so its reply has gone out")
        time.sleep(0.2)
        a.kill9()
        started = time.monotonic()
        rc, out, err = cli(None, "-h", hosts, "try", "jobs", "--lease",
                           "60s")
        note("semd-cli try succeeded %.2f s after the kill (owner-lease %s)"
             % (time.monotonic() - started, OWNER_LEASE))
        ok(rc == 0 and out.strip().isdigit(), "semd-cli -h A,B try jobs "
           "--lease 60s, started right after the kill, succeeds",
           (rc, out, err))
        cb = b.connect()
        match(cb.cmd("ROLE"), r"OK role=owner .*", "the standby took over")
        ok(wait_until(lambda: said("held again"), 20),
           "run says it holds the permit again")
        h = owned(cb, token)
        ok(h is not None and h["owner"] != "-", "HOLDERS on the new owner: "
           "run's permit is bound to its new connection, not unowned", h)
        open(gate, "w").close()
        run_p.wait(timeout=30)
        with open(errpath) as f:
            err = f.read()
        note(err)
        no_sanitizer_report(err, "semd-cli run")
        eq(run_p.returncode, 5, "run exits with CMD's status (5)")
        ok("release of jobs failed" not in err and "is lost" not in err,
           "no lost permit, no failed release", err)
        eq(owned(cb, token), None, "run released its permit on the new "
           "owner")


def test_daemon_side():
    if not daemon_has_standby():
        skip("this semd rejects the 'standby' directive: the daemon side "
             "of failover (issue 7) is not built in")


run(test_daemon_side, test_library, test_keeper, test_cli)
