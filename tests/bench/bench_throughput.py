#!/usr/bin/env python3
"""bench_throughput.py: ACQUIRE/RELEASE throughput by persistence mode.

Starts a private redis-server and, for each of persistence none, async and
sync, a semd on free loopback ports; CLIENTS processes then loop ACQUIRE
and RELEASE on one semaphore for SECONDS each. Prints grants per second,
and for the Redis modes how many grants each write (MULTI/EXEC) carried:
the effect of group commit. Prints figures only; asserts nothing.

    SEMD_BIN=daemon/semd python3 tests/bench/bench_throughput.py [CLIENTS] [SECONDS]
"""
import multiprocessing
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            sys.exit("%s exited at start-up" % what)
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("%s did not listen on %d" % (what, port))


def client(port, seconds, counts):
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rwb", buffering=0)
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        f.write(b"ACQUIRE bench\r\n")
        reply = f.readline().split()
        if not reply or reply[0] != b"OK":
            counts.put("unexpected reply %r after %d grants" % (reply, n))
            return
        f.write(b"RELEASE bench " + reply[1] + b"\r\n")
        f.readline()
        n += 1
    counts.put(n)
    s.close()


def stats(port):
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rwb", buffering=0)
    f.write(b"STATS\r\n")
    k = int(f.readline().split()[1])
    d = dict(f.readline().decode().strip().split("=", 1) for _ in range(k))
    s.close()
    return d


def run_mode(semd, mode, redis_port, clients, seconds, tmp):
    port = free_port()
    args = [semd, "--port", str(port), "--loglevel", "warn",
            "--semaphore", "bench", str(clients)]
    if mode != "none":
        args += ["--redis", "127.0.0.1:%d" % redis_port, "--persistence", mode,
                 "--redis-prefix", "bench-%s:" % mode]
    log = open(os.path.join(tmp, "semd-%s.log" % mode), "w")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_port(port, proc, "semd")
        counts = multiprocessing.Queue()
        procs = [multiprocessing.Process(target=client,
                                         args=(port, seconds, counts))
                 for _ in range(clients)]
        t0 = time.monotonic()
        for p in procs:
            p.start()
        results = [counts.get(timeout=seconds + 30) for _ in procs]
        errors = [r for r in results if isinstance(r, str)]
        if errors:
            sys.exit("%s: %s" % (mode, errors[0]))
        total = sum(results)
        for p in procs:
            p.join()
        elapsed = time.monotonic() - t0
        st = stats(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    line = "%-6s %9.0f grants/s" % (mode, total / elapsed)
    batches = int(st.get("persistence_batches", "0"))
    if batches:
        line += "   %8d writes, %5.1f grants per write" % (
            batches, int(st["grants_total"]) / batches)
    print(line, flush=True)


def main():
    clients = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    semd = os.environ.get("SEMD_BIN", "daemon/semd")
    redis = shutil.which("redis-server")
    if redis is None:
        sys.exit("redis-server is not installed (scripts/install-deps.sh)")
    tmp = tempfile.mkdtemp(prefix="semd-bench-")
    rport = free_port()
    rproc = subprocess.Popen([redis, "--port", str(rport), "--bind",
                              "127.0.0.1", "--save", "", "--appendonly",
                              "yes", "--appendfsync", "always", "--dir", tmp],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        wait_port(rport, rproc, "redis-server")
        print("%d clients, %.0f s each, ACQUIRE + RELEASE; redis with "
              "appendfsync always" % (clients, seconds))
        for mode in ("none", "async", "sync"):
            run_mode(semd, mode, rport, clients, seconds, tmp)
    finally:
        rproc.send_signal(signal.SIGTERM)
        rproc.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
