#!/usr/bin/env python3
"""Request ids and several semaphores at once, from the client side:
libsemc's semc_acquire_all() and its retry of a leased acquire whose
reply was lost (same ID, same token), semd-cli's NAME:N words, --id, and
run -s A -s B.

Against a scripted fake semd: the request lines libsemc and semd-cli
send (the id drawn for every lease, kept across the retries; ACQUIREALL;
NAME:N split at the last colon only before digits). Against a real semd:
both or neither, the same id answers the same token, a reply lost by a
proxy (or by a kill -9 of semd with persistence, and its restart) is
learnt again with one grant in HOLDERS, and two run loops that
name a and b in opposite orders never deadlock."""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clienttest import *  # noqa: E402,F403

HEX_ID = re.compile(r" ID [0-9a-f]{32}$")


class IdFake(Fake):
    """Answers acquires by name: lostonce loses the first reply of each
    id; closes loses them all; noid refuses ID as a semd 1.0 does; any
    ACQUIREALL gets OK 9; echo answers OK 5."""

    def __init__(self):
        self.ids = set()
        super().__init__()

    def answer(self, words):
        verb = words[0].upper()
        name = words[1] if len(words) > 1 else ""
        line = " ".join(words)
        if verb == "PING":
            return "OK PONG"
        if verb in ("RELEASE", "NAME"):
            return "OK"
        if verb == "ACQUIREALL":
            return "OK 9"
        if name == "lostonce":
            key = line.split(" ID ")[-1]
            if key not in self.ids:
                self.ids.add(key)
                return ""
            return "OK 42"
        if name == "closes":
            return ""
        if name == "noid":
            return ("ERR PROTO unknown option ID" if " ID " in line
                    else "OK 7")
        if name == "echo":
            return "OK 5"
        return "ERR PROTO the fake does not know %s" % verb

    def acquires(self, name=None):
        return [r for r in self.requests if r.split()[0] in
                ("ACQUIRE", "TRY", "ACQUIREALL") and
                (name is None or r.split()[1] == name)]


def without_timeout(line):
    return re.sub(r" TIMEOUT \d+", "", line)


def test_library_fake():
    f = IdFake()
    try:
        api("fakeid", f.port, timeout=90)
        lo = f.acquires("lostonce")
        eq(len(lo), 6, "lostonce: ACQUIRE, TRY, and with the caller's "
           "id, each twice (%s)" % lo)
        if len(lo) == 6:
            ok(HEX_ID.search(lo[0]) is not None,
               "a lease carries a drawn id of 32 hex digits: %s" % lo[0])
            eq(without_timeout(lo[1]), without_timeout(lo[0]),
               "the retry is the same request, with the same id")
            t0 = int(re.search(r"TIMEOUT (\d+)", lo[0]).group(1))
            t1 = int(re.search(r"TIMEOUT (\d+)", lo[1]).group(1))
            ok(t0 == 5000 and t1 <= t0, "its TIMEOUT is what is left "
               "(%d, then %d)" % (t0, t1))
            ok(lo[2].startswith("TRY lostonce 1 LEASE 60000 ID ") and
               lo[3] == lo[2], "TRY likewise: %s, %s" % (lo[2], lo[3]))
            ok(lo[2].split()[-1] != lo[0].split()[-1],
               "each call draws its own id")
            eq(lo[4], "ACQUIRE lostonce 1 TIMEOUT 400 LEASE 60000 ID "
               "job-7.run:1", "the caller's id as given")
            eq(without_timeout(lo[5]), without_timeout(lo[4]),
               "and sent again as given")
        cl = f.acquires("closes")
        leased = [r for r in cl if "LEASE" in r]
        ok(len(leased) >= 2 and len(set(leased)) == 1,
           "a reply never answered: sent again and again with one id "
           "(%d times)" % len(leased))
        eq([r for r in cl if "LEASE" not in r],
           ["ACQUIRE closes 1"], "a bound acquire is sent once")
        ni = f.acquires("noid")
        ok(len(ni) == 4 and " ID " in ni[0] and " ID " not in ni[1] and
           " ID " not in ni[2] and ni[3].endswith(" ID mine"),
           "ERR PROTO to a drawn id: sent again without, and the next "
           "without; the caller's id kept: %s" % ni)
        al = f.acquires()
        al = [r for r in al if r.startswith("ACQUIREALL")]
        ok(len(al) == 2 and al[0].startswith(
            "ACQUIREALL ma 2 mb 1 TIMEOUT 500 LEASE 60000 ID ") and
           HEX_ID.search(al[0]) and al[1] == "ACQUIREALL ma 2 mb 1",
           "ACQUIREALL's request lines: %s" % al)
        ok(not any(r.startswith("ACQUIREALL m0") or "bad name" in r
                   for r in f.requests),
           "nothing is sent for a refused argument")
    finally:
        f.close()


def test_cli_words():
    """NAME:N splits at the last colon only when digits follow."""
    f = IdFake()
    try:
        def sent(*args):
            before = len(f.requests)
            rc, out, err = cli(f.port, *args)
            got = [r for r in f.requests[before:]
                   if r.split()[0] in ("ACQUIRE", "TRY", "ACQUIREALL")]
            return rc, got, err

        cases = [
            (["acquire", "echo", "--lease", "1m"],
             "ACQUIRE echo 1 LEASE 60000", "one name: ACQUIRE, n 1"),
            (["acquire", "echo:3", "--lease", "1m"],
             "ACQUIRE echo 3 LEASE 60000", "echo:3 is echo, 3"),
            (["acquire", "echo", "-n", "3", "--lease", "1m"],
             "ACQUIRE echo 3 LEASE 60000", "-n as before"),
            (["ACQUIRE", "echo", "3", "LEASE", "60000"],
             "ACQUIRE echo 3 LEASE 60000", "the protocol's words"),
            (["acquire", "a:b", "x:2", "--lease", "1m"],
             "ACQUIREALL a:b 1 x 2 LEASE 60000", "a:b is a name, n 1"),
            (["acquire", "x:5:1", "y", "--lease", "1m", "--timeout", "2"],
             "ACQUIREALL x:5 1 y 1 TIMEOUT 2000 LEASE 60000",
             "x:5:1 is the name x:5, 1"),
            (["acquire", "a:", ":7", "b:c:0012", "--lease", "1m"],
             "ACQUIREALL a: 1 :7 1 b:c 12 LEASE 60000",
             "a: and :7 are names; b:c:0012 is b:c, 12"),
            (["ACQUIRE", "p:1", "q:2", "TIMEOUT", "100", "LEASE", "500",
              "ID", "r-1"],
             "ACQUIREALL p 1 q 2 TIMEOUT 100 LEASE 500 ID r-1",
             "the protocol's words after several names"),
            (["try", "p:1", "q:2", "--lease", "1m", "--id", "mine"],
             "ACQUIREALL p 1 q 2 TIMEOUT 0 LEASE 60000 ID mine",
             "try of several: ACQUIREALL TIMEOUT 0, --id"),
            (["try", "echo", "--lease", "1m", "--id=job.7"],
             "TRY echo 1 LEASE 60000 ID job.7", "try of one: TRY, --id="),
        ]
        for args, want, desc in cases:
            rc, got, err = sent(*args)
            eq(rc, 0, "%s: exit 0 (%s)" % (desc, err.strip()))
            if "ID" in want.split():
                eq(got, [want], desc)
            else:
                ok(len(got) == 1 and HEX_ID.search(got[0]) and
                   without_timeout(got[0].rsplit(" ID ", 1)[0]) ==
                   without_timeout(want) and
                   (" TIMEOUT " in want) == (" TIMEOUT " in got[0]),
                   "%s: %s (%s)" % (desc, want, got))
        bad = [
            (["acquire", "x:0", "--lease", "1m"], "must be 1..",
             "a count of 0"),
            (["acquire", "x:2147483648", "--lease", "1m"], "must be 1..",
             "a count over 2^31-1"),
            (["acquire", "x:2", "-n", "3", "--lease", "1m"], "given twice",
             "x:2 and -n 3"),
            (["acquire", "a:1", "b:1", "-n", "2", "--lease", "1m"],
             "NAME:N", "-n with several"),
            (["acquire", "a", "b", "a:2", "--lease", "1m"], "named twice",
             "a name given twice"),
            (["acquire"] + ["s%d" % i for i in range(17)] +
             ["--lease", "1m"], "at most 16", "17 names"),
            (["acquire", "bad!", "--lease", "1m"], "invalid semaphore",
             "a bad name"),
            (["acquire", "a:1", "b:1"], "--lease is needed",
             "several, bound, on the command line"),
            (["acquire", "echo", "--id", "x"], "--lease is needed",
             "--id without --lease"),
            (["acquire", "echo", "--lease", "1m", "--id", "a b"],
             "invalid request id", "an id with a blank"),
        ]
        for args, text, desc in bad:
            rc, got, err = sent(*args)
            ok(rc == 2 and text in err and got == [],
               "%s: usage error, nothing sent (%d: %s)" % (
                   desc, rc, (err.strip().splitlines() or [""])[0][:200]))
        rc, got, err = sent("acquire", "closes", "--lease", "1m")
        eq(rc, 3, "a lease never answered: exit 3")
        ok(" ID " in err and "learns the token" in err,
           "and the id to ask with is shown: %s" % err.strip()[:300])
    finally:
        f.close()


def test_library_real():
    with start_semd("--semaphore", "a", "1", "--semaphore", "b", "2") as d:
        api("ids", d.port)
        eq([d.connect().info(s)["used"] for s in ("a", "b")], ["0", "0"],
           "semd: nothing left held")


class LosingProxy:
    """127.0.0.1:port -> semd: passes lines both ways, but closes the
    client's connection, without its reply, after the first request that
    carries an ID (calling on_lose() first, when given). requests lists
    what the client sent; a semd out of reach closes the client's
    connection too."""

    def __init__(self, upstream, on_lose=None):
        self.upstream = upstream
        self.on_lose = on_lose
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.requests = []
        self.lost = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(s,),
                             daemon=True).start()

    def _serve(self, s):
        try:
            up = socket.create_connection(("127.0.0.1", self.upstream))
        except OSError:
            s.close()
            return
        f = up.makefile("rb")
        with s, up:
            try:
                self._relay(s, up, f)
            except OSError:
                pass        # either side closed: the client sees a close

    def _relay(self, s, up, f):
        buf = b""
        while True:
            data = s.recv(4096)
            if not data:
                return
            buf += data
            while b"\n" in buf:
                ln, buf = buf.split(b"\n", 1)
                self.requests.append(ln.decode())
                up.sendall(ln + b"\n")
                reply = f.readline()
                if b" ID " in ln and self.lost == 0:
                    self.lost += 1
                    # semd granted; the reply is lost, then on_lose (the
                    # client's retries meanwhile find no semd).
                    s.shutdown(socket.SHUT_RDWR)
                    if self.on_lose is not None:
                        self.on_lose()
                    return
                if not reply:
                    return
                s.sendall(reply)

    def close(self):
        self.sock.close()


def test_lost_reply_retry():
    with start_semd("--semaphore", "a", "1") as d:
        p = LosingProxy(d.port)
        try:
            p2 = subprocess.run([SEMC_API, "lostproxy", str(p.port)],
                                capture_output=True, text=True, timeout=60,
                                env=client_env())
            relay(p2.stdout, "semc_api")
            eq(p2.returncode, 0, "semc_api lostproxy exits 0")
            m = re.search(r"^token (\d+)$", p2.stdout, re.M)
            acq = [r for r in p.requests if r.startswith("ACQUIRE")]
            eq(p.lost, 1, "the proxy lost the reply of the first ACQUIRE")
            ok(len(acq) == 2 and without_timeout(acq[0]) ==
               without_timeout(acq[1]),
               "sent twice with the same id: %s" % acq)
            h = d.connect().listing("HOLDERS a")
            ok(m is not None and len(h) == 1 and
               h[0]["token"] == m.group(1) and h[0]["kind"] == "lease",
               "HOLDERS a: one grant, the token the client learnt "
               "(%s; %s)" % (m and m.group(1), h))
        finally:
            p.close()


def test_lost_reply_restart():
    """The reply is lost because semd was killed (kill -9) after granting
    it, with persistence: libsemc asks the restarted semd, which knows
    the id from Redis, and gets the same token."""
    if not semd_supports("persistence"):
        skip("this semd has no persistence")
    with Redis() as r:
        port = free_port()
        args = ("--bind", "127.0.0.1", "--port", str(port), "--semaphore",
                "a", "1", "--persistence", "sync", "--owner-lease", "1s",
                "--redis", "127.0.0.1:%d" % r.port)
        daemons = [start_semd(*args, bind=None, timeout=60)]

        def restart():
            d = daemons[-1]
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait()
            d.stop(quiet=True)
            daemons.append(start_semd(*args, bind=None, timeout=60))

        p = LosingProxy(port, on_lose=restart)
        try:
            p2 = subprocess.run([SEMC_API, "lostproxy", str(p.port),
                                 "90000"], capture_output=True, text=True,
                                timeout=120, env=client_env())
            relay(p2.stdout, "semc_api")
            no_sanitizer_report(p2.stderr, "semc_api lostproxy")
            eq(p2.returncode, 0, "semc_api lostproxy exits 0")
            m = re.search(r"^token (\d+)$", p2.stdout, re.M)
            acq = [q for q in p.requests if q.startswith("ACQUIRE")]
            ok(len(acq) >= 2 and len(set(map(without_timeout, acq))) == 1,
               "sent again with the same id until the new semd answered "
               "(%d times)" % len(acq))
            eq(len(daemons), 2, "semd was killed and started again")
            h = daemons[-1].connect().listing("HOLDERS a")
            ok(m is not None and len(h) == 1 and
               h[0]["token"] == m.group(1),
               "the restarted semd holds one grant, the token the client "
               "learnt (%s; %s)" % (m and m.group(1), h))
        finally:
            p.close()
            for d in daemons:
                d.stop(quiet=True)


def test_cli_real():
    with start_semd("--semaphore", "gpu", "1", "--semaphore", "db", "2",
                    "--semaphore", "x:5", "1") as d:
        rc, out, err = cli(d.port, "acquire", "gpu:1", "db:2", "--lease",
                           "1m", "--id", "job-1")
        eq(rc, 0, "acquire gpu:1 db:2 --lease 1m --id job-1 (%s)" % err)
        tok = out.strip()
        c = d.connect()
        eq([c.info(s)["used"] for s in ("gpu", "db")], ["1", "2"],
           "both held")
        h = c.listing("HOLDERS db")
        ok(len(h) == 1 and h[0]["token"] == tok and h[0]["n"] == "2" and
           h[0].get("multi") == "2", "HOLDERS db: the grant, n=2, "
           "multi=2 (%s)" % h)
        rc, out, err = cli(d.port, "acquire", "db:2", "gpu:1", "--lease",
                           "1m", "--id", "job-1")
        eq((rc, out.strip()), (0, tok), "the same id, another order: the "
           "same token")
        eq(len(c.listing("HOLDERS gpu")), 1, "still one grant")
        rc, out, err = cli(d.port, "try", "gpu", "--lease", "1m")
        eq(rc, 1, "gpu is taken: try exits 1")
        eq(cli(d.port, "release", "db", tok)[0], 0, "release through db")
        eq(c.info("gpu")["used"], "0", "frees gpu too")
        rc, out, err = cli(d.port, "acquire", "x:5:1", "--lease", "1m")
        eq(rc, 0, "x:5:1 names the semaphore x:5 (%s)" % err)
        eq(c.info("x:5")["used"], "1", "x:5 held")
        c.close()


def run_loop(port, order, seconds, counts, key):
    """semd-cli run -s A:1 -s B:1 -- sleep 0.2, again and again."""
    end = time.monotonic() + seconds
    args = []
    for s in order:
        args += ["-s", "%s:1" % s]
    while time.monotonic() < end:
        rc, out, err = cli(port, "run", *args, "--timeout", "30", "--",
                           "sh", "-c", 'test "$SEMD_SEMS" = "%s" && '
                           'sleep 0.2' % " ".join("%s:1" % s
                                                  for s in order),
                           timeout=60)
        counts[key].append(rc)
        if rc != 0:
            note("run %s: %d %s" % (key, rc, err.strip()[:300]))


def test_run_no_deadlock():
    """The issue's "done when": two loops, a then b against b then a, on
    capacity-1 semaphores, both make progress for 20 s."""
    with start_semd("--semaphore", "a", "1", "--semaphore", "b", "1") as d:
        counts = {"ab": [], "ba": []}
        threads = [threading.Thread(target=run_loop, args=(
            d.port, order, 20, counts, key)) for order, key in
            ((("a", "b"), "ab"), (("b", "a"), "ba"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        for key in counts:
            ok(len(counts[key]) >= 3 and all(rc == 0 for rc in
                                             counts[key]),
               "run -s %s:1 -s %s:1 ran %d times, each exit 0 (%s)" % (
                   key[0], key[1], len(counts[key]), counts[key][:20]))
        c = d.connect()
        eq([c.info(s)["used"] for s in "ab"], ["0", "0"],
           "nothing held after")


def test_run_bound_and_lease():
    """run -s holds every semaphore for CMD's life, bound or leased."""
    with start_semd("--semaphore", "gpu", "1", "--semaphore", "db",
                    "2") as d:
        for extra in ([], ["--lease", "30"]):
            rc, out, err = cli(
                d.port, "run", "-s", "gpu:1", "--sem", "db:2", *extra, "--",
                "sh", "-c", 'echo "$SEMD_SEM $SEMD_N $SEMD_SEMS"; '
                'semd-cli -p %d info gpu; semd-cli -p %d info db; '
                'semd-cli -p %d holders gpu' % (d.port, d.port, d.port),
                env={"PATH": os.path.dirname(SEMD_CLI) + ":" +
                     os.environ.get("PATH", "")})
            kind = "lease" if extra else "bound"
            eq(rc, 0, "run -s gpu:1 --sem db:2 %s (%s)" % (kind, err))
            lines = out.splitlines()
            ok(lines and lines[0] == "gpu 1 gpu:1 db:2",
               "%s: SEMD_SEM, SEMD_N, SEMD_SEMS: %s" % (kind, lines[:1]))
            ok("used=1" in out and "used=2" in out and
               ("lease" if extra else "conn") in out,
               "%s: both held while CMD runs" % kind, out)
            c = d.connect()
            eq([c.info(s)["used"] for s in ("gpu", "db")], ["0", "0"],
               "%s: both released when CMD ends" % kind)
            c.close()
        rc, out, err = cli(d.port, "run", "-s", "gpu:1", "-s", "db:1",
                           "-n", "2", "--", "true")
        ok(rc == 2 and "NAME:N" in err, "run -s a -s b -n 2: usage error")


run(test_library_fake, test_cli_words, test_library_real,
    test_lost_reply_retry, test_lost_reply_restart, test_cli_real,
    test_run_no_deadlock, test_run_bound_and_lease, time_limit=360)
