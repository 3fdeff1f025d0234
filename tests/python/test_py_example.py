#!/usr/bin/env python3
"""issue 22's "Done when", as a new user would try it: a fresh virtual
environment (python3 -m venv --system-site-packages, for Debian's
setuptools), `pip install --no-build-isolation ./client/python`, then the
README's Python example (the block under "From Python" marked for this
test) run in 20 processes at once against a real semd and a local
rate-limited HTTP API that records what it sees. Neither the processes'
own records (what each held, when) nor the API ever see more calls at
once than the capacity; every call carried its own fencing token. Also
client/python/examples/rate_limited_http.py, run from the tree."""

import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import pyunit
from semdtest import note, start_semd

CAPACITY = 2
PROCS = 20


class CountingAPI:
    """An HTTP server on 127.0.0.1 that counts the calls in flight and
    the fencing tokens it was given."""

    def __init__(self):
        api = self
        self.lock = threading.Lock()
        self.now = self.max = 0
        self.tokens = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                with api.lock:
                    api.now += 1
                    api.max = max(api.max, api.now)
                    api.tokens.append(self.headers.get("X-Fencing-Token"))
                time.sleep(0.01)        # a call that takes a while
                with api.lock:
                    api.now -= 1
                body = b"ok\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      Handler)
        self.url = "http://127.0.0.1:%d/call" % self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def readme_block():
    """The Python block of the README that follows this test's marker."""
    with open(os.path.join(pyunit.SRCDIR, "README.md")) as f:
        text = f.read()
    m = re.search(r"<!-- tests/python/test_py_example\.py runs this block"
                  r"[^\n]*-->\n```python\n(.*?)```", text, re.S)
    if m is None:
        raise AssertionError("README.md has no marked Python block")
    return m.group(1)


HELD_RE = re.compile(r"held (\S+) token=(\d+) from=([0-9.]+) to=([0-9.]+)")


def most_at_once(intervals):
    """The largest number of intervals that overlap at any moment."""
    events = sorted([(a, 1) for a, _ in intervals] +
                    [(b, -1) for _, b in intervals])
    now = best = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


class Example(unittest.TestCase):
    def run_many(self, argv, n, env, cwd):
        """Start n processes of argv at once; their outputs."""
        procs = [subprocess.Popen(argv, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env, cwd=cwd)
                 for _ in range(n)]
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 0, err.decode()[-2000:])
            outs.append(out.decode())
        return outs

    def check_runs(self, outs, api, calls):
        held = [HELD_RE.search(ln) for o in outs for ln in o.splitlines()]
        held = [m for m in held if m]
        self.assertEqual(len(held), calls, "one line per call")
        tokens = [int(m.group(2)) for m in held]
        self.assertEqual(len(set(tokens)), calls, "a token per call")
        self.assertEqual(sorted(int(t) for t in api.tokens), sorted(tokens),
                         "each call passed its token to the API")
        intervals = [(float(m.group(3)), float(m.group(4))) for m in held]
        together = most_at_once(intervals)
        note("%d calls: at most %d held at once by the processes' own "
             "records, %d in flight at the API (capacity %d)"
             % (calls, together, api.max, CAPACITY))
        self.assertLessEqual(together, CAPACITY)
        self.assertLessEqual(api.max, CAPACITY)

    def test_readme_example_in_a_fresh_venv(self):
        python = "/usr/bin/python3" if os.access("/usr/bin/python3",
                                                 os.X_OK) else sys.executable
        tmp = tempfile.mkdtemp(prefix="semd-venv.")
        api = None
        try:
            venv = os.path.join(tmp, "venv")
            p = subprocess.run([python, "-m", "venv",
                                "--system-site-packages", venv],
                               capture_output=True, text=True, timeout=300)
            if p.returncode != 0 and "ensurepip" in p.stdout + p.stderr:
                self.fail("python3 -m venv cannot make a venv (Debian: "
                          "apt-get install python3-venv): " + p.stdout)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            # pip builds in the directory it is given: a copy, since the
            # source tree may be read-only (make distcheck).
            src = os.path.join(tmp, "client", "python")
            shutil.copytree(pyunit.PACKAGE_DIR, src, ignore=shutil.
                            ignore_patterns("build", "*.egg-info",
                                            "__pycache__"))
            env = {k: v for k, v in os.environ.items()
                   if k not in ("PYTHONPATH", "PYTHONHOME")}
            env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
            pip = os.path.join(venv, "bin", "pip")
            p = subprocess.run([pip, "install", "--no-build-isolation",
                                "./client/python"], cwd=tmp, env=env,
                               capture_output=True, text=True, timeout=600)
            self.assertEqual(p.returncode, 0, p.stdout[-3000:] +
                             p.stderr[-3000:])
            script = os.path.join(tmp, "example.py")
            with open(script, "w") as f:
                f.write(readme_block())
            with start_semd("--semaphore", "api", str(CAPACITY)) as d:
                api = CountingAPI()
                env["SEMD_HOSTS"] = "127.0.0.1:%d" % d.port
                vpy = os.path.join(venv, "bin", "python")
                # The package comes from the venv, not from the tree.
                p = subprocess.run([vpy, "-c", "import semd; "
                                    "print(semd.__file__)"], cwd=tmp,
                                   env=env, capture_output=True, text=True,
                                   timeout=60)
                self.assertIn(venv, p.stdout)
                outs = self.run_many([vpy, script, api.url], PROCS, env,
                                     tmp)
                self.check_runs(outs, api, PROCS)
        finally:
            if api is not None:
                api.close()
            shutil.rmtree(tmp, ignore_errors=True)

    def test_example_script(self):
        script = os.path.join(pyunit.PACKAGE_DIR, "examples",
                              "rate_limited_http.py")
        with start_semd("--semaphore", "api", str(CAPACITY)) as d:
            api = CountingAPI()
            try:
                env = dict(os.environ, SEMD_HOSTS="127.0.0.1:%d" % d.port,
                           PYTHONPATH=pyunit.PACKAGE_DIR)
                outs = self.run_many([sys.executable, script, api.url,
                                      "--calls", "5"], 6, env, None)
                self.check_runs(outs, api, 30)
            finally:
                api.close()


if __name__ == "__main__":
    pyunit.main(time_limit=600)
