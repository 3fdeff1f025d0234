#!/usr/bin/env python3
"""bench_go: the Go client (client/go) against tests/bench/semload, in the
same rounds on the same semd (memory mode): 50 goroutines sharing one
semd.Client, each looping Weighted.Acquire(ctx, 1) + Release(1) on a
limit of 10 (each waiting Acquire on a connection of its own: 50
connections), next to semload's default run (50 connections, limit 10,
ACQUIRE + RELEASE). Prints pairs/s of each and their ratio per round and
the medians. The Go client is meant to be within 0.7x of semload.
Asserts nothing.

    SEMD_BIN=daemon/semd SEMLOAD=tests/bench/semload \\
        GOBENCH=tests/bench/gobench python3 tests/bench/bench_go.py
"""
import json
import os
import statistics
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("SEMD_TESTS") or
                os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import semdtest  # noqa: E402

SEMLOAD = os.environ.get("SEMLOAD", "tests/bench/semload")
GOBENCH = os.environ.get("GOBENCH", "tests/bench/gobench")


def run_json(argv):
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=600)
    res = None
    for ln in p.stdout.decode().splitlines():
        if ln.startswith("{"):
            res = json.loads(ln)
    if p.returncode != 0 or res is None:
        sys.stderr.write("FAILED: %s\n%s" % (" ".join(argv),
                                             p.stderr.decode()))
        raise SystemExit(1)
    return res


def main():
    rounds = int(os.environ.get("ROUNDS") or 3)
    duration = os.environ.get("DURATION") or "2.5"
    warmup = os.environ.get("WARMUP") or "1"
    print("bench_go: the Go client against semload, 50 connections, limit "
          "10, %d round(s) of %s s runs%s" % (
              rounds, duration, " (sanitized semd: not representative)"
              if semdtest.sanitized(semdtest.SEMD_BIN) else ""))
    c_rates, go_rates, ratios = [], [], []
    for i in range(rounds):
        with semdtest.start_semd() as d:
            c = run_json([SEMLOAD, "-p", str(d.port), "-c", "50", "-l", "10",
                          "-s", "cbench", "-w", warmup, "-d", duration,
                          "semd"])
            g = run_json([GOBENCH, "-a", "127.0.0.1:%d" % d.port, "-c", "50",
                          "-l", "10", "-s", "gobench", "-w", warmup, "-d",
                          duration])
        c_rates.append(c["pairs_per_s"])
        go_rates.append(g["pairs_per_s"])
        ratios.append(g["pairs_per_s"] / c["pairs_per_s"])
        print("  round %d: semload %.0f pairs/s, Go client %.0f pairs/s: "
              "%.2fx" % (i + 1, c_rates[-1], go_rates[-1], ratios[-1]))
        sys.stdout.flush()
    print("medians: semload %.0f pairs/s, Go client %.0f pairs/s, ratio "
          "%.2fx (goal: 0.7x or better)" % (
              statistics.median(c_rates), statistics.median(go_rates),
              statistics.median(ratios)))


if __name__ == "__main__":
    main()
