#!/usr/bin/env python3
"""Redis Sentinel (issue 19): semd on `redis sentinel://.../NAME` follows
the master when Sentinel promotes a replica.

Every process is private: a master, one replica, three redis-sentinel
(quorum 2, down-after-milliseconds 1000, failover-timeout 5000), all on
127.0.0.1 and free ports, stopped by PID.

1. Start-up: `-t` checks the URL's syntax only; sentinels that know no
   master of the name, and a plain address that answers ROLE as a
   replica, make semd exit 1 with one clear line.
2. Failover with a replica that lags: the replica replicates through a
   Proxy that is paused before the last grants and a release, so the
   promoted replica lacks them (what asynchronous replication can lose).
   The master is killed; semd must grant again within the failover time
   (the kill until the sentinels name the replica) plus 2 s, keep its
   client connections (owner-lease 10 s is longer than the failover),
   list every grant acknowledged before in HOLDERS, hand out tokens above
   every earlier one, and rewrite the new master from memory; after a
   restart of semd on the new master, the leases and the tokens are
   still right.
3. A manual failover (SENTINEL FAILOVER), with sentinels that need a
   password (sentinel-password): the old master lives on as a replica
   (it answers READONLY, ROLE slave); semd moves on +switch-master, keeps
   its clients and every grant, and writes only to the new master.
4. A failover longer than owner-lease (1 s here, against about 2 s of
   failover): semd stops acting as owner at its deadline (its clients'
   connections close), claims the new master as after an outage, and
   serves again with every lease the replica had and tokens above every
   earlier one.
"""
import os
import signal
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir))
from redistest import *  # noqa: E402,F403

FOLLOW_S = 2.0          # the contract: failover time + 2 s


def test_startup_checks():
    m, rep, ss = start_sentinel_group()
    st, out, err = run_semd("-t", "--redis", "sentinel://127.0.0.1:1/x")
    eq(st, 0, "semd -t accepts a sentinel:// URL without asking anyone")
    st, out, err = run_semd("-t", "--redis", "sentinel://a,,b/x")
    ok(st == 1 and "not HOST" in err and err.count("\n") == 1,
       "semd -t refuses a sentinel:// URL with an empty node, in one line",
       "status %s, stderr %r" % (st, err))
    st, out, err = run_semd("-t", "--redis", "sentinel://a/",
                            "--sentinel-password", "x")
    ok(st == 1 and "master name" in err, "semd -t refuses a sentinel:// "
       "URL without a master name", "status %s, stderr %r" % (st, err))

    st, log = semd_must_exit("--redis", sentinel_url(ss, "nosuchmaster"))
    lines = [ln for ln in log.splitlines() if "nosuchmaster" in ln]
    ok(st == 1 and len(lines) == 1 and
       "no sentinel knows a master named nosuchmaster" in lines[0],
       "sentinels that know no master of the name: semd exits 1 with one "
       "line", "status %s, log:\n%s" % (st, log_tail(log)))

    st, log = semd_must_exit("--redis", rep.addr())
    lines = [ln for ln in log.splitlines() if "replica" in ln]
    ok(st == 1 and len(lines) == 1 and "is a replica" in lines[0],
       "a plain address that answers as a replica: semd exits 1 with one "
       "line", "status %s, log:\n%s" % (st, log_tail(log)))

    p = PSemd(SentinelAddr(ss), ["--semaphore", "s", "3"])
    log = p.log_text()
    ok("master %s is 127.0.0.1:%d" % (MASTER_NAME, m.port) in log,
       "semd through the sentinels finds the master", log_tail(log))
    c = p.connect()
    t = expect_token(c, "ACQUIRE s LEASE 60000")
    got = wait_until(lambda: t in redis_tokens(m, "s"), 10, 0.05)
    ok(got, "a grant through sentinel:// is written to the master")


def sentinel_master(ss):
    """What the first sentinel that answers names as the master."""
    for s in ss:
        try:
            return s.master_addr()
        except (OSError, EOFError, RedisError):
            continue
    return None


def test_failover_lagging_replica():
    m = start_redis()
    link = Proxy(m.port)        # the replica's only way to the master
    rep = Redis(extra=["--replicaof", "127.0.0.1", str(link.port)])
    synced = wait_until(lambda: "master_link_status:up" in
                        rep.cmd("INFO", "replication"), 15, 0.05)
    ok(synced, "the replica syncs through the proxy")
    ss = [Sentinel(m) for _ in range(3)]
    agreed = wait_until(lambda: sentinels_agree(ss, 1), 30, 0.1)
    ok(agreed, "3 sentinels see the master, the replica and each other")

    p = PSemd(SentinelAddr(ss), ["--semaphore", "s", "1000",
                                 "--owner-lease", "10s"], grace="5s")
    holder = p.connect()        # bound grants: kept while it lives
    c = p.connect()
    bound = [expect_token(holder, "ACQUIRE s") for _ in range(3)]
    leases = [expect_token(c, "ACQUIRE s LEASE 600000") for _ in range(5)]
    caught_up = wait_until(lambda: redis_as_memory(rep) == memory_state(c),
                           10, 0.05)
    ok(caught_up, "the replica has every grant of the first round")

    # What the promoted replica will lack: written to the master only.
    link.pause()
    late = [expect_token(c, "ACQUIRE s LEASE 600000") for _ in range(4)]
    expect(c, "RELEASE s %d" % leases[0], "OK")
    leases = leases[1:] + late
    before = memory_state(c)
    ok(redis_as_memory(rep) != before, "the replica lacks the last round "
       "(the proxy holds it back)")
    top = max(bound + leases)

    t_kill = time.monotonic()
    m.kill()
    link.close()
    switched = wait_until(lambda: sentinel_master(ss) == rep.addr(), 30,
                          0.02)
    t_switch = time.monotonic()
    ok(switched, "the sentinels promote the replica",
       "they name %s" % attempt(sentinel_master, ss))
    tok, t_grant, last = poll_grant(p.port, "TRY s", timeout=30)
    ok(tok is not None, "semd grants again after the failover",
       "last reply %r; log:\n%s" % (last, log_tail(p.log_text())))
    if tok is None:
        return
    failover_s = t_switch - t_kill
    follow_s = t_grant - t_switch
    note("measured: master killed -> sentinels name the replica %.2f s; "
         "-> semd grants again %.2f s later (%.2f s after the kill)" %
         (failover_s, follow_s, t_grant - t_kill))
    ok(follow_s <= FOLLOW_S, "semd follows within the failover time + %.0f "
       "s" % FOLLOW_S, "%.2f s after the sentinels switched" % follow_s)
    ok(tok > top, "tokens keep increasing across the failover",
       "%d after %d" % (tok, top))

    # The clients' connections survived: the failover was shorter than
    # owner-lease.
    expect(holder, "PING", "OK PONG", "the holder's connection survived")
    h = holders(c, "s")
    missing = [t for t in bound + leases if t not in h]
    ok(not missing, "HOLDERS lists every grant acknowledged before the "
       "failover", "missing %s" % missing)
    rewritten = wait_until(lambda: redis_as_memory(rep) ==
                           memory_state(c), 10, 0.05)
    ok(rewritten, "the new master is rewritten from memory (the grants it "
       "lacked are there, the release it missed is done)",
       "Redis %s\nmemory %s" % (attempt(redis_as_memory, rep),
                                attempt(memory_state, c)))
    log = p.log_text()
    ok("a failover" in log, "semd says it rewrites the promoted replica",
       log_tail(log))
    n2 = expect_token(c, "ACQUIRE s LEASE 600000")
    expect(c, "RELEASE s %d" % leases[-1], "OK")
    leases = leases[:-1]
    wait_until(lambda: redis_as_memory(rep) == memory_state(c), 10, 0.05)
    print("# semd's log around the failover:\n" + log_tail(p.log_text(), 12))

    # A restart right after: everything comes back from the new master.
    holder.close()
    c.close()
    p.restart()
    c = p.connect()
    h = holders(c, "s")
    missing = [t for t in leases + [n2] if t not in h]
    ok(not missing, "after a restart on the new master, HOLDERS lists "
       "every lease", "missing %s; HOLDERS %s" % (missing, sorted(h)))
    t3 = expect_token(c, "TRY s")
    ok(t3 > n2, "tokens keep increasing after the restart",
       "%d after %d" % (t3, n2))


def test_manual_failover():
    m, rep, ss = start_sentinel_group(password="s3ntinel")
    p = PSemd(SentinelAddr(ss), ["--semaphore", "s", "100",
                                 "--sentinel-password", "s3ntinel",
                                 "--owner-lease", "10s"], grace="5s")
    holder = p.connect()
    c = p.connect()
    grants = [expect_token(holder, "ACQUIRE s") for _ in range(2)]
    grants += [expect_token(c, "ACQUIRE s LEASE 600000") for _ in range(3)]
    caught_up = wait_until(lambda: redis_as_memory(rep) == memory_state(c),
                           10, 0.05)
    ok(caught_up, "the replica has every grant")
    eq(c.stats().get("redis_master"), m.addr(),
       "STATS redis_master names the master the sentinels gave")

    t0 = time.monotonic()
    eq(ss[0].cmd("SENTINEL", "failover", MASTER_NAME), "OK",
       "SENTINEL FAILOVER is accepted")
    switched = wait_until(lambda: sentinel_master(ss) == rep.addr(), 30,
                          0.02)
    ok(switched, "the sentinels name the replica as the master")
    tok, t_grant, last = poll_grant(p.port, "TRY s", timeout=30)
    ok(tok is not None, "semd grants on the new master",
       "last reply %r; log:\n%s" % (last, log_tail(p.log_text())))
    if tok is None:
        return
    note("measured: SENTINEL FAILOVER -> semd grants again %.2f s later" %
         (t_grant - t0))
    ok(tok > max(grants), "tokens keep increasing")
    moved = wait_until(lambda: c.stats().get("redis_master") ==
                       rep.addr(), 30, 0.05)
    ok(moved, "STATS redis_master names the promoted replica",
       c.stats().get("redis_master"))
    demoted = wait_until(lambda: attempt(m.cmd, "ROLE").startswith(
        "['slave'"), 20, 0.05)
    ok(demoted, "the old master lives on as a replica",
       attempt(m.cmd, "ROLE"))
    expect(holder, "PING", "OK PONG", "the holder's connection survived")
    h = holders(c, "s")
    missing = [t for t in grants if t not in h]
    ok(not missing, "HOLDERS lists every grant", "missing %s" % missing)
    t2 = expect_token(c, "ACQUIRE s LEASE 600000")
    landed = wait_until(lambda: t2 in redis_tokens(rep, "s"), 10, 0.05)
    ok(landed, "a new grant is written to the new master")
    same = wait_until(lambda: redis_as_memory(rep) == memory_state(c), 10,
                      0.05)
    ok(same, "the new master holds what semd holds")
    log = p.log_text()
    ok("+switch-master" in log, "semd heard +switch-master (through the "
       "password-protected sentinels)", log_tail(log))


def test_failover_longer_than_lease():
    m, rep, ss = start_sentinel_group()
    p = PSemd(SentinelAddr(ss), ["--semaphore", "s", "100",
                                 "--owner-lease", "1s"], grace="2s")
    c = p.connect()
    leases = [expect_token(c, "ACQUIRE s LEASE 600000") for _ in range(3)]
    caught_up = wait_until(lambda: redis_as_memory(rep) == memory_state(c),
                           10, 0.05)
    ok(caught_up, "the replica has every lease")
    t_kill = time.monotonic()
    m.kill()
    switched = wait_until(lambda: sentinel_master(ss) == rep.addr(), 30,
                          0.02)
    t_switch = time.monotonic()
    ok(switched, "the sentinels promote the replica")
    closed = wait_until(lambda: attempt(c.cmd, "PING", 1.0) != "'OK PONG'",
                        10, 0.05)
    ok(closed, "past owner-lease without Redis, semd closes its clients' "
       "connections")
    tok, t_grant, last = poll_grant(p.port, "TRY s", timeout=30)
    ok(tok is not None, "semd serves again on the new master",
       "last reply %r; log:\n%s" % (last, log_tail(p.log_text())))
    if tok is None:
        return
    note("measured (owner-lease 1 s): master killed -> sentinels switch "
         "%.2f s -> semd grants again %.2f s later" %
         (t_switch - t_kill, t_grant - t_switch))
    ok(t_grant - t_switch <= FOLLOW_S + 1.0, "semd is back within the "
       "failover time + 3 s (a claim and a load on the new master)",
       "%.2f s after the switch" % (t_grant - t_switch))
    ok(tok > max(leases), "tokens keep increasing")
    c = p.connect()
    h = holders(c, "s")
    missing = [t for t in leases if t not in h]
    ok(not missing, "every lease the replica had is listed",
       "missing %s" % missing)


run(test_startup_checks, test_failover_lagging_replica, test_manual_failover,
    test_failover_longer_than_lease, time_limit=300)
