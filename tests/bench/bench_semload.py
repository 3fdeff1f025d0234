#!/usr/bin/env python3
"""bench_semload: semd's throughput against its anchors, measured with
tests/bench/semload (C, libevent, one thread, closed loop).

Each round, for each Redis setting (appendonly no; appendfsync everysec;
appendfsync always), starts a private redis-server and runs on it, side by
side:
  - Redis PING over 50 and 1000 connections (first setting only: PING
    does not touch the AOF), the anchor for the request path;
  - the Lua sorted-set semaphore of redis-semaphore (npm), retry pauses
    0, 1 and 10 ms, limits 10 and 50, 50 and 1000 connections;
  - semd with persistence none (appendonly no), sync (everysec), async and
    sync (always), same limits and connections, ACQUIRE+RELEASE pairs,
    no hold or think time.
then the pipelined run: 50 connections each keeping 16 TRY+RELEASE pairs
in flight against semd (memory) vs `redis-benchmark -t ping_inline -c 50
-P 16 -q`; the Python client (client/python, tests/bench/pyload.py: 50
threads sharing one semd.Client, limit 10, ACQUIRE+RELEASE pairs, each
permit WATCHed by its keeper) next to semload's 50 connections on the
same semd (memory), one after the other; the replica acknowledgements:
a master (appendfsync everysec) with one replica, and on it, side by side,
semd sync with redis-min-replicas 0 and 1 (WAIT 1 after every batch),
limits 10 and 50, 50 connections. After the rounds, the scale runs: 10 000 connections, 9 990
waiting on one semaphore of capacity 10 (pairs/s against 50 connections
on the same semd, semd's RSS per connection, hand-off p99), and the
restart load of 100 000 semaphores with one grant each (bench_load.py).

Prints progress on stderr and, at the end, the table of medians over the
rounds on stdout; each semd row's ratio to the best Lua row of the same
round, Redis setting, limit and connections, and to PING over the same
connections, is computed per round and its median printed. Asserts
nothing about speed; exits 1 only when a run fails (a daemon that does
not start, an unexpected reply).

    make bench                                 # from the build directory
    ROUNDS=1 DURATION=1 make bench             # a quick look
    SEMD_BIN=daemon/semd SEMLOAD=tests/bench/semload \\
        python3 tests/bench/bench_semload.py --parts replicas   # N=0 vs N=1

Everything listens on 127.0.0.1 and free ports and is stopped by PID.
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
TESTS = os.environ.get("SEMD_TESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir)
sys.path.insert(0, TESTS)
import redistest  # noqa: E402
from redistest import Redis  # noqa: E402
import semdtest  # noqa: E402
from semdtest import start_semd  # noqa: E402

SEMLOAD = os.environ.get("SEMLOAD") or os.path.join(
    os.path.dirname(semdtest.SEMD_BIN), os.pardir, "tests", "bench",
    "semload")
REDIS_BENCHMARK = os.environ.get("REDIS_BENCHMARK") or "redis-benchmark"
PYLOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "pyload.py")

AOFS = ("no", "everysec", "always")
SEMD_MODES = {"no": ("none",), "everysec": ("sync",),
              "always": ("async", "sync")}
LIMITS = (10, 50)
CONNS = (50, 1000)
PAUSES = (0, 1, 10)
SCALE_CONNS = 10000
REPLICA_NS = (0, 1)     # redis-min-replicas, side by side
REPLICA_CONNS = 50


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


class Bench:
    def __init__(self, a):
        self.a = a
        self.results = {}       # key -> [per-round result dict]
        self.nrun = 0
        self.jsonf = open(a.json, "w") if a.json else None
        self.round = 0

    def semload(self, target, port, what, *args, warmup=None,
                duration=None):
        """One semload run; returns its JSON object (exits on failure)."""
        argv = [SEMLOAD, "-p", str(port), "-w",
                str(self.a.warmup if warmup is None else warmup), "-d",
                str(self.a.duration if duration is None else duration)]
        argv += [str(x) for x in args] + [target]
        self.nrun += 1
        t = time.monotonic()
        p = subprocess.run(argv, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=600)
        out, err = p.stdout.decode(), p.stderr.decode()
        res = None
        for ln in out.splitlines():
            if ln.startswith("{"):
                res = json.loads(ln)
        if p.returncode != 0 or res is None:
            log("FAILED: %s\n%s" % (" ".join(argv), err))
            raise SystemExit(1)
        res["what"] = what
        res["round"] = self.round
        if self.jsonf:
            self.jsonf.write(json.dumps(res) + "\n")
            self.jsonf.flush()
        rate = res.get("pairs_per_s", res.get("ops_per_s"))
        extra = ""
        if res.get("handoff_p99_us") is not None:
            extra = ", hand-off p99 %.2f ms" % (res["handoff_p99_us"] / 1000)
        log("  [round %d, run %d, %.1f s] %s conns=%d: %.0f %s/s%s" %
            (self.round, self.nrun, time.monotonic() - t, what,
             res["conns"], rate, "PING" if target == "ping" else "pairs",
             extra))
        return res

    def put(self, key, res):
        self.results.setdefault(key, []).append(res)

    # ---------------------------------------------------------------
    def round_table(self):
        """One round: per Redis setting, its semd daemons run side by side
        with the anchors, so that each (limit, conns) cell's Lua and semd
        runs are a few seconds apart."""
        for aof in AOFS:
            r = Redis(appendonly=aof != "no",
                      fsync=aof if aof != "no" else "everysec")
            daemons = []
            try:
                log(" redis-server pid %d port %d, %s" %
                    (r.pid, r.port, aof_label(aof)))
                if aof == AOFS[0]:
                    for n in CONNS:
                        self.put(("ping", n), self.semload(
                            "ping", r.port, "redis PING", "-c", n))
                for mode in SEMD_MODES[aof]:
                    args = ["--maxclients", "20000"]
                    if mode != "none":
                        args += ["--redis", r.addr(), "--persistence", mode,
                                 "--redis-prefix", "bench%d%s%s:" %
                                 (self.round, aof, mode)]
                    daemons.append((mode, start_semd(*args, timeout=60)))
                for limit in LIMITS:
                    for n in CONNS:
                        for pause in PAUSES:
                            self.put(("lua", aof, limit, n, pause),
                                     self.semload(
                                "lua", r.port, "lua %s retry %d ms limit %d"
                                % (aof_label(aof), pause, limit),
                                "-c", n, "-l", limit, "-r", pause,
                                "-s", "lua%d" % limit))
                        for mode, d in daemons:
                            self.put(("semd", aof, mode, limit, n),
                                     self.semload(
                                "semd", d.port, "semd %s limit %d" %
                                (mode_label(aof, mode), limit), "-c", n,
                                "-l", limit, "-s", "b%d" % limit))
                for mode, d in daemons:
                    d.stop(quiet=True)
                daemons = []
                if aof == AOFS[0] and "pipeline" in self.a.parts:
                    self.round_pipeline(r)
            finally:
                for mode, d in daemons:
                    d.stop(quiet=True)
                r.stop()

    def round_pipeline(self, r):
        d = start_semd(timeout=60)
        try:
            self.put(("pipe-semd",), self.semload(
                "semd", d.port, "semd memory, 16 TRY+RELEASE in flight",
                "-c", 50, "-P", 16, "-l", 1000000, "-s", "pipe"))
        finally:
            d.stop(quiet=True)
        n = max(200000, int(500000 * self.a.duration))
        argv = [REDIS_BENCHMARK, "-h", "127.0.0.1", "-p", str(r.port), "-t",
                "ping_inline", "-c", "50", "-P", "16", "-q", "-n", str(n)]
        p = subprocess.run(argv, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=600)
        out = p.stdout.decode("utf-8", "replace")
        m = re.findall(r"PING_INLINE: ([\d.]+) requests per second", out)
        if p.returncode != 0 or not m:
            log("FAILED: %s\n%s" % (" ".join(argv), out[-2000:]))
            raise SystemExit(1)
        rps = float(m[-1])
        log("  [round %d] %s: %.0f PING/s" % (self.round, " ".join(
            argv[:1] + argv[5:]), rps))
        self.put(("pipe-redis",), {"ops_per_s": rps, "round": self.round})
        if self.jsonf:
            self.jsonf.write(json.dumps({"what": "redis-benchmark",
                                         "argv": argv, "ops_per_s": rps,
                                         "round": self.round}) + "\n")

    def round_python(self):
        """The Python client's row and semload's, on one semd (memory),
        50 threads / 50 connections, limit 10."""
        d = start_semd(timeout=60)
        try:
            self.put(("py-semload",), self.semload(
                "semd", d.port, "semd memory limit 10 (for python)", "-c",
                50, "-l", 10, "-s", "pyc10"))
            argv = [sys.executable, PYLOAD, str(d.port), "--threads", "50",
                    "--limit", "10", "--sem", "pyp10", "--warmup",
                    str(self.a.warmup), "--duration", str(self.a.duration)]
            self.nrun += 1
            t = time.monotonic()
            p = subprocess.run(argv, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=600)
            lines = [ln for ln in p.stdout.decode().splitlines()
                     if ln.startswith("{")]
            if p.returncode != 0 or not lines:
                log("FAILED: %s\n%s" % (" ".join(argv), p.stderr.decode()))
                raise SystemExit(1)
            res = json.loads(lines[-1])
            res["round"] = self.round
            res["what"] = "python client"
            if self.jsonf:
                self.jsonf.write(json.dumps(res) + "\n")
            log("  [round %d, run %d, %.1f s] python client threads=50: "
                "%.0f pairs/s" % (self.round, self.nrun,
                                  time.monotonic() - t, res["pairs_per_s"]))
            self.put(("py-python",), res)
        finally:
            d.stop(quiet=True)

    def round_replicas(self):
        """semd sync with redis-min-replicas 0 and 1 on one master with
        one replica (appendfsync everysec on the master, no AOF on the
        replica), each cell's two runs a few seconds apart."""
        r = Redis(appendonly=True, fsync="everysec")
        rep = daemons = None
        try:
            rep = redistest.Replica(r)
            log(" redis-server pid %d port %d with replica pid %d port %d" %
                (r.pid, r.port, rep.pid, rep.port))
            daemons = [(n, start_semd(
                "--maxclients", "20000", "--redis", r.addr(),
                "--persistence", "sync", "--redis-min-replicas", str(n),
                "--redis-prefix", "bench%drepl%d:" % (self.round, n),
                timeout=60)) for n in REPLICA_NS]
            for limit in LIMITS:
                for n, d in daemons:
                    self.put(("repl", n, limit), self.semload(
                        "semd", d.port, "semd sync, redis-min-replicas %d, "
                        "limit %d" % (n, limit), "-c", REPLICA_CONNS, "-l",
                        limit, "-s", "r%d" % limit))
        finally:
            for n, d in daemons or []:
                d.stop(quiet=True)
            if rep is not None:
                rep.stop()
            r.stop()

    # ---------------------------------------------------------------
    def scale(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        need = SCALE_CONNS + 200
        if hard != resource.RLIM_INFINITY and hard < need:
            log("scale: the hard limit of open files (ulimit -Hn) is %d; "
                "10 000 connections need about %d in semd and in semload "
                "each: skipped" % (hard, need))
            return None
        if soft != resource.RLIM_INFINITY and soft < need:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
        d = start_semd("--maxclients", "20000", timeout=60)
        try:
            base = self.semload("semd", d.port, "semd memory limit 10",
                                "-c", 50, "-l", 10, "-s", "small")
            big = self.semload("semd", d.port, "semd memory limit 10, "
                               "%d connections" % SCALE_CONNS,
                               "-c", SCALE_CONNS, "-l", 10, "-s", "big",
                               "--rss-pid", d.pid, "--connect-timeout", 300,
                               warmup=max(1.0, self.a.warmup),
                               duration=max(2.0, 2 * self.a.duration))
        finally:
            d.stop(quiet=True)
        return base, big

    def load_100k(self):
        env = dict(os.environ, SEMD_BIN=semdtest.SEMD_BIN, SEMD_TESTS=TESTS,
                   PYTHONDONTWRITEBYTECODE="1")
        argv = [sys.executable, os.path.join(TESTS, "bench",
                                             "bench_load.py"),
                "--sems", "100000", "--grants", "100000", "--fsync",
                "everysec"]
        log("scale: %s" % " ".join(argv[1:]))
        p = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=900)
        out = p.stdout.decode("utf-8", "replace")
        if p.returncode != 0:
            log(out)
            raise SystemExit(1)
        return out


def aof_label(aof):
    return {"no": "appendonly no", "everysec": "appendfsync everysec",
            "always": "appendfsync always"}[aof]


def mode_label(aof, mode):
    if mode == "none":
        return "memory"
    return "%s (%s)" % (mode, aof)


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def fmt_ms(us):
    return "%7.2f" % (us / 1000.0) if us is not None else "      -"


def fmt_x(x):
    return "%6.2fx" % x if x is not None else "      -"


def print_table(b):
    R = b.results
    rounds = b.a.rounds
    print()
    print("semd against its anchors: medians of %d round%s, %.1f s per run "
          "after %.1f s warm-up; ACQUIRE+RELEASE pairs, no hold or think "
          "time;" % (rounds, "" if rounds == 1 else "s", b.a.duration,
                     b.a.warmup))
    print("latency: ACQUIRE sent -> OK read (the wait for a permit); "
          "hand-off: RELEASE sent -> the waiter's OK read (when conns > "
          "limit).")
    print("starved: connections that waited through a whole run without a "
          "grant (their wait is not in the acquire percentiles).")
    print("x Lua: semd / the best Lua row of the same round, Redis setting, "
          "limit and conns; x PING: semd / Redis PING over the same conns.")
    for n in CONNS:
        rows = R.get(("ping", n), [])
        if rows:
            print("Redis PING, %4d conns: %8.0f PING/s   latency p50 %s ms "
                  "p99 %s ms" % (n, med([x["ops_per_s"] for x in rows]),
                                 fmt_ms(med([x["lat_p50_us"] for x in rows])),
                                 fmt_ms(med([x["lat_p99_us"]
                                             for x in rows]))))
    hdr = ("%-27s %5s %5s %9s %7s %7s %7s %7s %7s %7s %7s" %
           ("", "limit", "conns", "pairs/s", "acq p50", "acq p99",
            "ho p50", "ho p99", "starved", "x Lua", "x PING"))
    for aof in AOFS:
        print()
        print("-- Redis %s" % aof_label(aof))
        print(hdr)
        for limit in LIMITS:
            for n in CONNS:
                for mode in SEMD_MODES[aof]:
                    rows = R.get(("semd", aof, mode, limit, n), [])
                    if not rows:
                        continue
                    xl, xp = [], []
                    for x in rows:
                        lua = [y["pairs_per_s"] for p in PAUSES
                               for y in R.get(("lua", aof, limit, n, p), [])
                               if y["round"] == x["round"]]
                        ping = [y["ops_per_s"] for y in R.get(("ping", n), [])
                                if y["round"] == x["round"]]
                        xl.append(x["pairs_per_s"] / max(lua) if lua and
                                  max(lua) > 0 else None)
                        xp.append(x["pairs_per_s"] / ping[0] if ping else
                                  None)
                    print_row("semd " + mode_label(aof, mode), limit, n, rows,
                              med(xl), med(xp))
                for p in PAUSES:
                    rows = R.get(("lua", aof, limit, n, p), [])
                    if rows:
                        print_row("  lua retry %d ms" % p, limit, n, rows,
                                  None, None)


def print_row(name, limit, n, rows, xl, xp):
    print("%-27s %5d %5d %9.0f %s %s %s %s %7.0f %s %s" % (
        name, limit, n, med([x["pairs_per_s"] for x in rows]),
        fmt_ms(med([x["acquire_p50_us"] for x in rows])),
        fmt_ms(med([x["acquire_p99_us"] for x in rows])),
        fmt_ms(med([x.get("handoff_p50_us") for x in rows])),
        fmt_ms(med([x.get("handoff_p99_us") for x in rows])),
        med([x["starved"] for x in rows]), fmt_x(xl), fmt_x(xp)))


def print_pipeline(b):
    sem = b.results.get(("pipe-semd",), [])
    red = b.results.get(("pipe-redis",), [])
    if not sem or not red:
        return
    ratios = [s["pairs_per_s"] / r["ops_per_s"] for s, r in zip(sem, red)]
    pairs = med([s["pairs_per_s"] for s in sem])
    print()
    print("-- pipelined: 50 connections, 16 requests in flight each "
          "(medians of %d)" % len(sem))
    print("semd memory, 16 TRY+RELEASE pairs per connection: %8.0f pairs/s "
          "(%.0f requests/s), TRY p50 %s ms p99 %s ms" % (
              pairs, 2 * pairs,
              fmt_ms(med([s["acquire_p50_us"] for s in sem])).strip(),
              fmt_ms(med([s["acquire_p99_us"] for s in sem])).strip()))
    print("redis-benchmark -t ping_inline -c 50 -P 16 -q:      %8.0f PING/s"
          % med([r["ops_per_s"] for r in red]))
    print("ratio: %.2f pairs per PING (%.2f semd requests per PING)" %
          (med(ratios), 2 * med(ratios)))


def print_python(b):
    c = b.results.get(("py-semload",), [])
    py = b.results.get(("py-python",), [])
    if not c or not py:
        return
    ratios = [x["pairs_per_s"] / y["pairs_per_s"] for x, y in zip(py, c)]
    print()
    print("-- the Python client (medians of %d): semd memory, limit 10, "
          "ACQUIRE+RELEASE pairs" % len(py))
    print("semload (C), 50 connections:             %8.0f pairs/s   "
          "ACQUIRE p50 %s ms p99 %s ms" % (
              med([x["pairs_per_s"] for x in c]),
              fmt_ms(med([x["acquire_p50_us"] for x in c])).strip(),
              fmt_ms(med([x["acquire_p99_us"] for x in c])).strip()))
    print("python semd.Client, 50 threads:          %8.0f pairs/s   "
          "ACQUIRE p50 %s ms p99 %s ms  (%.2fx semload, same round)" % (
              med([x["pairs_per_s"] for x in py]),
              fmt_ms(med([x["acquire_p50_us"] for x in py])).strip(),
              fmt_ms(med([x["acquire_p99_us"] for x in py])).strip(),
              med(ratios)))


def print_replicas(b):
    R = b.results
    if not any(k[0] == "repl" for k in R):
        return
    print()
    print("-- replica acknowledgements: semd sync on a master (appendfsync "
          "everysec) with one replica, %d connections (medians of %d)" %
          (REPLICA_CONNS, b.a.rounds))
    print("%-34s %5s %9s %7s %7s %9s" % ("", "limit", "pairs/s", "acq p50",
                                       "acq p99", "x N=0"))
    for limit in LIMITS:
        base = R.get(("repl", 0, limit), [])
        for n in REPLICA_NS:
            rows = R.get(("repl", n, limit), [])
            if not rows:
                continue
            ratios = [x["pairs_per_s"] / y["pairs_per_s"] for x in rows
                      for y in base if y["round"] == x["round"] and
                      y["pairs_per_s"] > 0]
            print("%-34s %5d %9.0f %s %s %s" % (
                "semd sync, redis-min-replicas %d" % n, limit,
                med([x["pairs_per_s"] for x in rows]),
                fmt_ms(med([x["acquire_p50_us"] for x in rows])),
                fmt_ms(med([x["acquire_p99_us"] for x in rows])),
                "   " + fmt_x(med(ratios)) if n != 0 else "        -"))


def print_scale(sc, load_out):
    print()
    print("-- scale (one run each)")
    if sc is not None:
        base, big = sc
        per = big.get("rss_per_conn_b")
        per_end = big.get("rss_per_conn_end_b")
        print("semd memory, capacity 10: %d connections %8.0f pairs/s; %d "
              "connections %8.0f pairs/s (%.2fx), hand-off p50 %s ms p99 %s "
              "ms, ACQUIRE p99 %s ms" % (
                  base["conns"], base["pairs_per_s"], big["conns"],
                  big["pairs_per_s"], big["pairs_per_s"] /
                  base["pairs_per_s"], fmt_ms(big["handoff_p50_us"]).strip(),
                  fmt_ms(big["handoff_p99_us"]).strip(),
                  fmt_ms(big["acquire_p99_us"]).strip()))
        if per is not None:
            print("semd RSS: %d kB before, %d kB with %d connections open "
                  "(%.0f B per connection), %d kB with %d waiting (%.0f B "
                  "per connection)" % (
                      big["rss_before_kb"], big["rss_ready_kb"], big["conns"],
                      per, big["rss_end_kb"], big["conns"] - 10, per_end))
    if load_out:
        print("100 000 semaphores with one grant each (bench_load.py):")
        for ln in load_out.splitlines():
            if ln.startswith(("semd log:", "wall time", "semd RSS",
                              "filled redis")):
                print("  " + ln)


def main():
    env_rounds = int(os.environ.get("ROUNDS") or 3)
    env_dur = float(os.environ.get("DURATION") or 2.5)
    env_warm = float(os.environ.get("WARMUP") or 0.5)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=env_rounds,
                    help="rounds, medians taken (ROUNDS, default 3)")
    ap.add_argument("--duration", type=float, default=env_dur,
                    help="seconds counted per run (DURATION, default 2.5)")
    ap.add_argument("--warmup", type=float, default=env_warm,
                    help="seconds of warm-up per run (WARMUP, default 0.5)")
    ap.add_argument("--parts",
                    default="table,pipeline,python,replicas,scale",
                    help="any of table,pipeline,python,replicas,scale")
    ap.add_argument("--json", help="also write every run's JSON line here")
    a = ap.parse_args()
    a.parts = set(a.parts.split(","))
    for path in (SEMLOAD, semdtest.SEMD_BIN):
        if not os.access(path, os.X_OK):
            sys.exit("%s is not built (make)" % path)
    redistest.require_redis()
    b = Bench(a)
    t0 = time.monotonic()
    log("bench_semload: semd %s, semload %s%s; %d round(s) of %.1f s runs" %
        (semdtest.SEMD_BIN, SEMLOAD, " (sanitizer builds: figures are "
         "several times lower)" if semdtest.sanitized(semdtest.SEMD_BIN) or
         semdtest.sanitized(SEMLOAD) else "", a.rounds, a.duration))
    sc = load_out = None
    try:
        for i in range(a.rounds if a.parts & {"table", "pipeline", "python",
                                              "replicas"} else 0):
            b.round = i + 1
            log("round %d of %d (%.0f s so far)" % (
                b.round, a.rounds, time.monotonic() - t0))
            if "table" in a.parts:
                b.round_table()
            elif "pipeline" in a.parts:
                r = Redis(appendonly=False)
                try:
                    b.round_pipeline(r)
                finally:
                    r.stop()
            if "python" in a.parts:
                b.round_python()
            if "replicas" in a.parts:
                b.round_replicas()
        if "scale" in a.parts:
            log("scale (%.0f s so far)" % (time.monotonic() - t0))
            sc = b.scale()
            load_out = b.load_100k()
    finally:
        redistest._stop_everything()
    print_table(b) if "table" in a.parts else None
    print_pipeline(b)
    print_python(b)
    print_replicas(b)
    if "scale" in a.parts:
        print_scale(sc, load_out)
    print()
    print("%d semload runs in %.0f s; machine: %d cores (%s)" % (
        b.nrun, time.monotonic() - t0, os.cpu_count(), cpu_model()))
    sys.stdout.flush()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


if __name__ == "__main__":
    main()
