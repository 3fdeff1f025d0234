#!/usr/bin/env python3
"""libsemc against a real semd: every API call, AUTH, each error a real
semd gives, and a Unix socket. The calls and their checks are in
tests/client/semc_api.c; this script starts the daemons."""
import os
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


run(test_every_call, test_auth, test_errors, test_unix_socket)
