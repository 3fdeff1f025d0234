#!/usr/bin/env python3
"""libsemc-uninstalled.pc: the example of semc.h and the README
(client/examples/guard.c) builds with cc and nothing but what
`PKG_CONFIG_PATH=$builddir/client pkg-config --cflags --libs
libsemc-uninstalled` says, and the program runs against the build tree's
libsemc."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403
import clienttest  # noqa: E402

SRCDIR = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILDDIR = clienttest._BUILD


def test_uninstalled_pc():
    if shutil.which("pkg-config") is None or shutil.which("cc") is None:
        skip("no pkg-config or cc")
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(BUILDDIR, "client"))
    p = subprocess.run(["pkg-config", "--cflags", "--libs",
                        "libsemc-uninstalled"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    flags = p.stdout.decode().split()
    ok(p.returncode == 0, "pkg-config finds libsemc-uninstalled",
       p.stderr.decode())
    note("pkg-config: %s" % " ".join(flags))
    v = subprocess.run(["pkg-config", "--modversion",
                        "libsemc-uninstalled"], env=env,
                       stdout=subprocess.PIPE).stdout.decode().strip()
    with open(os.path.join(SRCDIR, "client", "semc.h")) as f:
        ok('#define SEMC_VERSION\t\t"%s"' % v in f.read(),
           "its version %s is semc.h's SEMC_VERSION" % v)
    out = os.path.join(tempfile.mkdtemp(prefix="semdtest."), "guard")
    src = os.path.join(SRCDIR, "client", "examples", "guard.c")
    p = subprocess.run(["cc", "-o", out, src] + flags,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    ok(p.returncode == 0, "cc guard.c $(pkg-config ...) builds",
       p.stdout.decode())
    if p.returncode != 0:
        return
    with start_semd("--semaphore", "db", "1") as d:
        r = subprocess.run([out, "db", "2"], timeout=60,
                           env=dict(client_env(), SEMD_PORT=str(d.port)),
                           stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        err = r.stderr.decode("utf-8", "replace")
        no_sanitizer_report(err, "guard (uninstalled build)")
        ok(r.returncode == 0, "the program runs against the build tree's "
           "libsemc", err)
        eq(len(r.stdout.decode().splitlines()), 2, "two steps done")
        eq(d.connect().info("db")["used"], "0", "and it released")


run(test_uninstalled_pc)
