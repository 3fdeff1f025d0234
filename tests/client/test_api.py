#!/usr/bin/env python3
"""libsemc against a real semd: every API call, AUTH, each error a real
semd gives, and a Unix socket. The calls and their checks are in
tests/client/semc_api.c; this script starts the daemons."""
import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403


def test_every_call():
    with start_semd("--semaphore", "jobs", "2") as d:
        api("api", d.port)
        eq(d.connect().info("jobs")["used"], "0",
           "semd: nothing left held")


def test_auth():
    with start_semd("--semaphore", "jobs", "2",
                    "--requirepass", "secret") as d:
        api("auth", d.port)


def test_errors():
    with start_semd("--semaphore", "jobs", "2",
                    "--max-semaphores", "2") as d:
        api("errors", d.port, free_port())


def test_unix_socket():
    path = os.path.join(tempfile.mkdtemp(prefix="semdtest."), "semd.sock")
    with start_semd("--semaphore", "jobs", "2", "--unixsocket", path) as d:
        api("unix", path)
        eq(d.connect().info("jobs")["used"], "0", "semd: nothing held")


def test_opts_and_lease_zero():
    with start_semd("--semaphore", "jobs", "2") as d:
        api("opts", d.port)


def test_exports():
    """libsemc.so exports exactly the functions of semc.h (its version
    node aside): nothing of its own helpers or of proto."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(SEMC_API))))
    lib = os.path.join(top, "client", ".libs", "libsemc.so")
    hdr = os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), "client", "semc.h")
    if not os.path.exists(lib):
        ok(True, "# SKIP no shared libsemc (configure --disable-shared)")
        return
    out = subprocess.run(["nm", "-D", "--defined-only", lib],
                         capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        w = line.split()
        if len(w) == 3:
            syms[w[2].split("@")[0]] = w[1]
    with open(hdr) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    funcs = set(re.findall(r"^[a-z][^;(#]*?\b(semc_[a-z0-9_]+)\(", text,
                           re.M))
    funcs -= set(re.findall(r"typedef[^;]*?\b(semc_[a-z0-9_]+)\(", text))
    exported = {n for n, t in syms.items() if t != "A"}
    ok(len(funcs) > 30, "semc.h declares %d functions" % len(funcs))
    eq(sorted(exported - funcs), [], "nothing exported beyond semc.h")
    eq(sorted(funcs - exported), [], "every function of semc.h exported")
    nodes = [n for n, t in syms.items() if t == "A"]
    ok(nodes and all(n.startswith("LIBSEMC_") for n in nodes),
       "version nodes: %s" % nodes)


run(test_every_call, test_auth, test_errors, test_unix_socket,
    test_opts_and_lease_zero, test_exports)
