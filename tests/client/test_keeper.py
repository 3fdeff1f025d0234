#!/usr/bin/env python3
"""The lease keeper keeps a short lease alive for several of its lengths,
and tells the holder at once (callback, readable fd, lost state) when a
refresh fails because the lease was revoked."""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403


def test_keeper():
    with start_semd("--semaphore", "jobs", "2") as d:
        api("keeper", d.port)
        st = d.connect().stats()
        eq(st.get("revoked"), "1", "semd: one grant revoked")
        eq(st.get("expired"), "1", "semd: one lease expired (the "
           "unwatched one), the kept one never did")


run(test_keeper)
