#!/usr/bin/env python3
"""The pure parts of the Python client, without a daemon: durations in
seconds or timedelta to the wire's milliseconds, request lines, reply
parsing and the error classes, host lists, and the owner search's
capped backoff on a fake clock. Also that the package imports from the
tree with the standard library only."""

import os
import re
import subprocess
import sys
import unittest
from datetime import timedelta

import pyunit
import semd
from semd import protocol
from semd.errors import error_for
from semd.hosts import Addresses, Search, address_list, parse_address


class Durations(unittest.TestCase):
    def test_seconds_and_timedelta(self):
        self.assertEqual(protocol.to_ms(30, "t"), 30000)
        self.assertEqual(protocol.to_ms(1.5, "t"), 1500)
        self.assertEqual(protocol.to_ms(0, "t"), 0)
        self.assertEqual(protocol.to_ms(0.0001, "t"), 1, "rounded up")
        self.assertEqual(protocol.to_ms(0.1, "t"), 100, "no float noise")
        self.assertEqual(protocol.to_ms(timedelta(minutes=2), "t"), 120000)
        self.assertEqual(protocol.to_ms(timedelta(milliseconds=250), "t"),
                         250)

    def test_bad_durations(self):
        for bad in (-1, -0.001, float("nan"), float("inf"), 2**31):
            with self.assertRaises(ValueError, msg=repr(bad)):
                protocol.to_ms(bad, "t")
        for bad in (True, "5s", None, [1]):
            with self.assertRaises(TypeError, msg=repr(bad)):
                protocol.to_ms(bad, "t")
        with self.assertRaises(ValueError):
            protocol.to_ms(0, "lease", 1)


class Lines(unittest.TestCase):
    def test_acquire_lines(self):
        self.assertEqual(protocol.acquire_line("db", 1, None, None),
                         "ACQUIRE db 1")
        self.assertEqual(protocol.acquire_line("db", 2, 1500, 30000),
                         "ACQUIRE db 2 TIMEOUT 1500 LEASE 30000")
        self.assertEqual(protocol.acquire_line("db", 1, 0, 100),
                         "TRY db 1 LEASE 100")
        for sem in ("", "a b", "x" * 201, "é", "a\nPING"):
            with self.assertRaises(ValueError, msg=repr(sem)):
                protocol.acquire_line(sem, 1, None, None)
        for n in (0, -1, 2**31, True, 1.0):
            with self.assertRaises(ValueError, msg=repr(n)):
                protocol.acquire_line("db", n, None, None)

    def test_replies(self):
        r = protocol.parse_reply("OK 42 extra=1")
        self.assertEqual(protocol.parse_token(r), 42, "extra words ignored")
        self.assertEqual(protocol.parse_reply("TIMEOUT").kind, "TIMEOUT")
        self.assertIsInstance(protocol.parse_reply("TIMEOUT").error(),
                              semd.NotGranted)
        e = protocol.parse_reply("ERR NOSEM no semaphore 'x'")
        self.assertEqual((e.kind, e.code, e.text),
                         ("ERR", "NOSEM", "no semaphore 'x'"))
        self.assertIsInstance(e.error(), semd.NoSuchSemaphore)
        s = protocol.parse_reply("ERR STANDBY owner=10.0.0.5:7313 epoch=7 "
                                 "this is a standby")
        self.assertEqual(protocol.standby_owner(s), "10.0.0.5:7313")
        self.assertIsNone(protocol.standby_owner(
            protocol.parse_reply("ERR STANDBY owner=- epoch=0 x")))
        for bad in ("", "HELLO", "ERR", "TIMEOUT 5"):
            with self.assertRaises(semd.ProtocolError, msg=repr(bad)):
                protocol.parse_reply(bad)
        self.assertEqual(protocol.parse_kv(["a=1", "junk", "b=x=y"]),
                         {"a": "1", "b": "x=y"})

    def test_error_classes(self):
        cases = {"NOSEM": semd.NoSuchSemaphore, "NOTHELD": semd.NotHeld,
                 "UNAVAILABLE": semd.Unavailable, "PROTO":
                 semd.ProtocolError, "STANDBY": semd.Standby,
                 "RANGE": semd.TooLarge, "AUTH": semd.AuthError}
        for code, cls in cases.items():
            e = error_for(code, "text")
            self.assertIsInstance(e, cls)
            self.assertEqual(e.code, code)
        self.assertIsInstance(error_for("NOTHELD", "x"), semd.PermitLost)
        self.assertIsInstance(error_for("STANDBY", "x"), semd.Unavailable)
        later = error_for("NEWCODE", "from a later semd")
        self.assertEqual((type(later), later.code),
                         (semd.SemdError, "NEWCODE"))
        self.assertTrue(issubclass(semd.AcquireLost, semd.PermitLost))
        self.assertTrue(issubclass(semd.AcquireLost, semd.ReplyLost))
        self.assertTrue(issubclass(semd.ConnectFailed, semd.Unavailable))


class Hosts(unittest.TestCase):
    def test_addresses(self):
        self.assertEqual(parse_address("db1"), ("db1", 7313))
        self.assertEqual(parse_address("db1:7400"), ("db1", 7400))
        self.assertEqual(parse_address("[::1]:7400"), ("::1", 7400))
        self.assertEqual(parse_address("[::1]"), ("::1", 7313))
        self.assertEqual(parse_address("::1"), ("::1", 7313))
        for bad in ("", "db1:", "db1:0", "db1:70000", "[::1", "a b:1",
                    ":7313"):
            with self.assertRaises(ValueError, msg=repr(bad)):
                parse_address(bad)
        self.assertEqual(address_list("a:1, b"), [("a", 1), ("b", 7313)])
        self.assertEqual(address_list(["a:1"]), [("a", 1)])

    def test_semd_hosts(self):
        old = os.environ.get("SEMD_HOSTS")
        try:
            os.environ["SEMD_HOSTS"] = "h1:1,h2:2"
            self.assertEqual(address_list(None), [("h1", 1), ("h2", 2)])
            del os.environ["SEMD_HOSTS"]
            self.assertEqual(address_list(None), [("127.0.0.1", 7313)])
        finally:
            if old is not None:
                os.environ["SEMD_HOSTS"] = old

    def test_search_backoff(self):
        now = [0.0]
        a = Addresses("a:1,b:2")
        s = Search(a, 3.0, clock=lambda: now[0])
        pauses = []
        while True:
            p = s.next()
            if p is None:
                break
            pauses.append(p)
            now[0] += p + 0.01          # each attempt takes 10 ms
        rounds = [p for p in pauses if p > 0]
        self.assertEqual(rounds[:5], [0.1, 0.2, 0.4, 0.8, 1.0],
                         "100 ms doubling, capped at 1 s")
        self.assertLess(now[0], 3.2, "gives up at the failover timeout")
        one = Search(Addresses("a:1"), 3.0, clock=lambda: 0.0)
        self.assertIsNone(one.next(), "one address: one attempt")
        self.assertEqual(Search(Addresses("a:1"), 3.0, clock=lambda: 0.0,
                                always=True).next(), 0.1)

    def test_standby_redirect(self):
        a = Addresses("a:1,b:2")
        idx = a.learn_owner("c:3")
        self.assertEqual(a.addrs[idx], ("c", 3))
        s = Search(a, 5.0, clock=lambda: 0.0)
        self.assertEqual(s.next(idx), 0.0)
        self.assertEqual(a.current(), ("c", 3), "goes where it points")
        self.assertTrue(a.many())
        self.assertEqual(a.learn_owner("a:1"), 0, "a listed owner")


class Packaging(unittest.TestCase):
    def test_version_is_semds(self):
        with open(os.path.join(pyunit.SRCDIR, "configure.ac")) as f:
            m = re.search(r"AC_INIT\(\[semd\], \[([^]]+)\]", f.read())
        with open(os.path.join(pyunit.PACKAGE_DIR, "pyproject.toml")) as f:
            py = re.search(r'^version = "([^"]+)"', f.read(), re.M)
        self.assertIsNotNone(m)
        self.assertIsNotNone(py)
        self.assertEqual(semd.__version__, m.group(1))
        self.assertEqual(py.group(1), m.group(1))

    def test_imports_with_the_standard_library_only(self):
        """Every module imported by the package is from the standard
        library (a fresh interpreter, -S: no site-packages)."""
        code = ("import sys; sys.path.insert(0, %r); import semd, "
                "semd.aio, semd.keeper; "
                "bad = [m for m, v in sys.modules.items() if "
                "getattr(v, '__file__', None) and 'site-packages' in "
                "v.__file__]; print(bad); sys.exit(1 if bad else 0)"
                % pyunit.PACKAGE_DIR)
        p = subprocess.run([sys.executable, "-S", "-c", code],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


if __name__ == "__main__":
    pyunit.main(time_limit=60)
