#!/usr/bin/env python3
"""The Python client's type hints, checked with mypy --strict (the
package and its example) where mypy is installed (Debian: mypy);
skipped with a message otherwise."""

import os
import shutil
import subprocess
import tempfile
import unittest

import pyunit


class TypeHints(unittest.TestCase):
    def test_mypy_strict(self):
        mypy = shutil.which("mypy")
        if mypy is None:
            self.skipTest("mypy is not installed (apt-get install mypy)")
        pkg = pyunit.PACKAGE_DIR
        with tempfile.TemporaryDirectory(prefix="semd-mypy.") as cache:
            # The cache goes to a temporary directory: the source tree
            # may be read-only (make distcheck).
            p = subprocess.run(
                [mypy, "--strict", "--cache-dir", cache,
                 "--no-error-summary", os.path.join(pkg, "semd"),
                 os.path.join(pkg, "examples", "rate_limited_http.py")],
                capture_output=True, text=True, timeout=300,
                env=dict(os.environ, MYPYPATH=pkg))
        self.assertEqual(p.returncode, 0, "mypy --strict:\n" + p.stdout +
                         p.stderr)


if __name__ == "__main__":
    pyunit.main(time_limit=300)
