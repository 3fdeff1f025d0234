#!/usr/bin/env python3
"""pyload: the Python client's closed-loop load, for bench_semload.py's
"python" row: THREADS threads sharing one semd.Client, each acquiring
and releasing one permit of SEM (capacity LIMIT, created here) with no
hold or think time, as semload does. Prints one JSON line:
pairs_per_s (over DURATION after WARMUP), conns (threads), acquire p50
and p99 in microseconds.

    pyload.py PORT [--threads 50] [--limit 10] [--warmup 0.5] [--duration 2.5]
"""

import argparse
import json
import os
import sys
import threading
import time

sys.dont_write_bytecode = True
SRCDIR = os.environ.get("SEMD_SRCDIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
sys.path.insert(0, os.path.join(SRCDIR, "client", "python"))
import semd  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("port", type=int)
    ap.add_argument("--threads", type=int, default=50)
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--sem", default="pyload")
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--duration", type=float, default=2.5)
    a = ap.parse_args()
    client = semd.Client("127.0.0.1:%d" % a.port, name="pyload")
    client.create(a.sem, a.limit)
    state = {"counting": False, "stop": False}
    counts = [0] * a.threads
    lat = [[] for _ in range(a.threads)]
    errors = []

    def worker(i):
        try:
            while not state["stop"]:
                t = time.monotonic()
                p = client.acquire(a.sem)
                got = time.monotonic()
                p.release()
                if state["counting"]:
                    counts[i] += 1
                    lat[i].append(got - t)
        except Exception as e:      # reported, and the run fails
            errors.append(repr(e))

    ts = [threading.Thread(target=worker, args=(i,))
          for i in range(a.threads)]
    for t in ts:
        t.start()
    time.sleep(a.warmup)
    state["counting"] = True
    t0 = time.monotonic()
    time.sleep(a.duration)
    state["counting"] = False
    elapsed = time.monotonic() - t0
    state["stop"] = True
    for t in ts:
        t.join(60)
    client.close()
    if errors:
        sys.exit("pyload: %s" % errors[0])
    all_lat = sorted(x for xs in lat for x in xs)

    def pct(q):
        return all_lat[min(len(all_lat) - 1, int(q * len(all_lat)))] * 1e6 \
            if all_lat else None
    print(json.dumps({"pairs_per_s": sum(counts) / elapsed,
                      "conns": a.threads, "limit": a.limit,
                      "acquire_p50_us": pct(0.5),
                      "acquire_p99_us": pct(0.99)}))


if __name__ == "__main__":
    main()
