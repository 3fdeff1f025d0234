"""chaosmodel: what clients were told, and one checker that decides from
it whether semd kept its promise (issue 16). Used by the failover safety
scenarios (tests/persistence/test_failover_safety.py and
test_failover_faults.py) and by the randomized runs (test_chaos.py,
test_chaos_multi.py, test_failover_chaos.py).

Clients record, on this process's one monotonic clock, when they SENT
each request, what the reply was and when they READ it. The checker never
looks at semd's own view; it asks what a careful client was entitled to
believe:

  - a grant is believed from the moment `OK <token>` is read;
  - a lease is believed until send time of its ACQUIRE (or of its last
    answered REFRESH) + the lease, or until its RELEASE is sent;
  - a bound grant is believed until its RELEASE is sent, its connection is
    seen closed, or the client-side bound runs out: the send time of the
    last request on that connection that was answered in time, +
    reclaim-grace (a client that got no answer to anything it sent in the
    last reclaim-grace must consider its bound permits lost; so clients
    PING while they hold bound permits);
  - over-grant: at some instant, the n of the believed grants of one
    semaphore sum above its capacity;
  - tokens: unique per semaphore, and a grant whose request was sent after
    another grant's OK was read has the larger token (a token never repeats
    and never goes backwards, across flushes and failovers too);
  - acknowledged grant lost: a lease that is still believed must be listed
    by HOLDERS of whichever daemon owns the data set.
"""

import re
import select
import sys
import threading
import time
import traceback

sys.dont_write_bytecode = True
from semdtest import (connect, parse_kv, ConnClosed, ReplyTimeout,  # noqa: E402
                      ok)

now = time.monotonic
INF = float("inf")

# The end of a belief is computed from the client's send times, which is
# already on the safe side; this many seconds of overlap at the end of a
# belief are tolerated (scheduling of the test's own threads).
TOLERANCE = 0.005


class Grant:
    """One grant as its client saw it. kind is 'lease' or 'conn'.
    attach: this record is a bound permit taken back with ATTACH (its
    token was counted when it was first granted)."""

    def __init__(self, sem, n, token, kind, t_sent, t_ok, session,
                 lease_ms=None, attach=False, label=""):
        self.sem = sem
        self.n = n
        self.token = token
        self.kind = kind
        self.t_sent = t_sent
        self.t_ok = t_ok
        self.session = session
        self.lease_ms = lease_ms
        self.attach = attach
        self.label = label
        self.lease_base = (t_sent, lease_ms)   # last answered REFRESH
        self.t_release = None                  # RELEASE sent

    def refreshed(self, t_sent, ms):
        if t_sent >= self.lease_base[0]:
            self.lease_base = (t_sent, ms)

    def released(self, t_sent):
        if self.t_release is None:
            self.t_release = t_sent

    def lease_end(self):
        base, ms = self.lease_base
        return base + ms / 1000.0

    def end(self, grace_s):
        """The instant this client must stop believing the grant."""
        e = self.t_release if self.t_release is not None else INF
        if self.kind == "lease":
            return min(e, self.lease_end())
        s = self.session
        if s is not None and s.t_closed is not None:
            e = min(e, s.t_closed)
        return min(e, bound_end(self.t_sent, s.answered if s else [],
                                grace_s))

    def belief(self, grace_s):
        """(sem, n, start, end, token, kind) or None if never believed."""
        end = self.end(grace_s)
        if end <= self.t_ok:
            return None
        return (self.sem, self.n, self.t_ok, end, self.token, self.kind)

    def __repr__(self):
        return "Grant(%s n=%d tok=%d %s%s sent=%.3f ok=%.3f%s)" % (
            self.sem, self.n, self.token, self.kind,
            " attach" if self.attach else "", self.t_sent, self.t_ok,
            " " + self.label if self.label else "")


def bound_end(t_sent, answered, grace_s):
    """The client-side bound of a bound permit whose request was sent at
    t_sent, given the (send, reply) times of the answered requests of its
    connection: it lasts while, at every instant t, some request sent
    after t - grace has been answered by t."""
    end = t_sent + grace_s
    for s, a in answered:
        if s < t_sent:
            continue
        if a >= end:
            break
        end = max(end, s + grace_s)
    return end


class Session:
    """One client connection that records every request: .answered is the
    (send, reply) times of the requests answered, .t_closed when it was
    seen closed (or given up: a reply that did not come in time makes the
    client drop the connection, since later replies would be misread)."""

    def __init__(self, port, timeout=3.0, label=""):
        self.port = port
        self.label = label
        self.conn = connect(port, timeout=timeout)
        self.answered = []
        self.log = []          # (line, t_sent, reply or None, t_reply)
        self.t_closed = None
        self.lock = threading.Lock()

    def closed(self):
        return self.t_closed is not None

    def _lost(self):
        if self.t_closed is None:
            self.t_closed = now()
        self.conn.close()

    def req(self, line, timeout=5.0):
        """(reply or None if the connection was lost, t_sent, t_reply)."""
        with self.lock:
            t_sent = now()
            if self.closed():
                return None, t_sent, t_sent
            try:
                self.conn.send(line + "\r\n")
                rep = self.conn.line(timeout)
            except (OSError, ConnClosed, ReplyTimeout):
                self._lost()
                self.log.append((line, t_sent, None, now()))
                return None, t_sent, now()
            t_rep = now()
            self.answered.append((t_sent, t_rep))
            self.log.append((line, t_sent, rep, t_rep))
            return rep, t_sent, t_rep

    def send_only(self, line):
        """Send without reading (the reply is read by reply())."""
        t_sent = now()
        try:
            self.conn.send(line + "\r\n")
        except OSError:
            self._lost()
        return t_sent

    def reply(self, t_sent, line, timeout):
        """The reply to a request sent with send_only(), recorded."""
        try:
            rep = self.conn.line(timeout)
        except (OSError, ConnClosed, ReplyTimeout):
            self._lost()
            self.log.append((line, t_sent, None, now()))
            return None, now()
        t_rep = now()
        self.answered.append((t_sent, t_rep))
        self.log.append((line, t_sent, rep, t_rep))
        return rep, t_rep

    def ready(self, timeout=0.0):
        """True if a whole reply line has arrived (nothing is consumed)."""
        if b"\n" not in self.conn.buf and not self.conn.eof:
            self.conn._fill(timeout)
        return b"\n" in self.conn.buf

    def reply_in_thread(self, t_sent, line, timeout):
        """Read the reply to a send_only() request in a thread, so that its
        arrival time is taken when it arrives, whatever the test does
        meanwhile: returns a dict that gets 'reply' and 't' (reply None
        if the connection closed or nothing came within timeout)."""
        out = {}

        def read():
            out["reply"], out["t"] = self.reply(t_sent, line, timeout)
        th = threading.Thread(target=read, daemon=True)
        th.start()
        out["thread"] = th
        return out

    def watch(self, seconds):
        """Watch the socket for seconds; True if it was seen closed."""
        end = now() + seconds
        while not self.closed():
            left = end - now()
            if left <= 0:
                return False
            r, _, _ = select.select([self.conn.sock], [], [], left)
            if not r:
                return False
            try:
                data = self.conn.sock.recv(4096)
            except (ConnectionResetError, BrokenPipeError):
                data = b""
            if not data:
                self._lost()
                return True
            self.conn.buf += data
        return True

    def close(self):
        self.conn.close()
        if self.t_closed is None:
            self.t_closed = now()


TOKEN_RE = re.compile(r"OK ([0-9]+)")
ACQ_RE = re.compile(r"(?i)(ACQUIRE|TRY)\s+(\S+)(?:\s+([0-9]+))?(.*)")


def parse_acquire(line):
    """(sem, n, lease_ms or None) of an ACQUIRE/TRY line."""
    m = ACQ_RE.fullmatch(line.strip())
    if not m:
        raise ValueError("not an ACQUIRE/TRY: %r" % line)
    words = m.group(4).split()
    lease = None
    for i, w in enumerate(words):
        if w.upper() == "LEASE" and i + 1 < len(words):
            lease = int(words[i + 1])
    return m.group(2), int(m.group(3) or 1), lease


def acquire(session, line, timeout=5.0, label=""):
    """Send an ACQUIRE/TRY on session: (Grant or None, reply or None)."""
    sem, n, lease = parse_acquire(line)
    rep, t_sent, t_rep = session.req(line, timeout)
    m = TOKEN_RE.fullmatch(rep or "")
    if not m:
        return None, rep
    return Grant(sem, n, int(m.group(1)), "lease" if lease else "conn",
                 t_sent, t_rep, session, lease, label=label), rep


def release(session, g, timeout=5.0):
    """RELEASE g on session (the belief ends when it is sent)."""
    rep, t_sent, _ = session.req("RELEASE %s %d" % (g.sem, g.token),
                                 timeout)
    g.released(t_sent)
    return rep


# --------------------------------------------------------------------------
# The checker
# --------------------------------------------------------------------------

def overbooked(beliefs, cap, tol=TOLERANCE):
    """Sweep belief intervals (sem, n, start, end, token, kind) of one
    semaphore; the first instant where they sum above cap and the grants
    then believed, or None. Ends are moved tol earlier."""
    events = []
    for i, b in enumerate(beliefs):
        if b[3] - tol <= b[2]:
            continue            # shorter than the tolerance
        events.append((b[2], 1, i))
        events.append((b[3] - tol, 0, i))   # ends sort before starts
    events.sort()
    held = {}
    total = 0
    for t, kind, i in events:
        if kind:
            held[i] = beliefs[i]
            total += beliefs[i][1]
            if total > cap:
                return t, list(held.values())
        else:
            total -= held.pop(i)[1]
    return None


def beliefs_of(grants, grace_s):
    return [b for b in (g.belief(grace_s) for g in grants) if b is not None]


def describe_overgrant(bad, t0):
    t, held = bad
    return "at t=%.3f s: %s" % (t - t0, ", ".join(
        "token %d n=%d %s believed %.3f..%.3f" % (
            b[4], b[1], b[5], b[2] - t0, b[3] - t0) for b in held))


def check_overgrant(ok, grants, caps, grace_s, t0, what=""):
    """One check per semaphore of caps: no over-grant. Returns the number
    of failures."""
    bad_count = 0
    for sem, cap in sorted(caps.items()):
        bel = beliefs_of([g for g in grants if g.sem == sem], grace_s)
        bad = overbooked(bel, cap)
        if not ok(bad is None, "%sno over-grant of %s (capacity %d, %d "
                  "believed grants)" % (what, sem, cap, len(bel)),
                  bad and describe_overgrant(bad, t0)):
            bad_count += 1
    return bad_count


def token_problems(grants):
    """Tokens repeated or going backwards, per semaphore: a list of
    descriptions. A grant whose request was sent after another grant's OK
    was read must have the larger token. ATTACH records are skipped."""
    out = []
    by_sem = {}
    for g in grants:
        if not g.attach:
            by_sem.setdefault(g.sem, []).append(g)
    for sem, gs in sorted(by_sem.items()):
        seen = {}
        for g in gs:
            if g.token in seen:
                out.append("%s: token %d acknowledged twice (%r, %r)" %
                           (sem, g.token, seen[g.token], g))
            seen[g.token] = g
        by_ok = sorted(gs, key=lambda g: g.t_ok)
        i = 0
        top = None
        for g in sorted(gs, key=lambda g: g.t_sent):
            while i < len(by_ok) and by_ok[i].t_ok < g.t_sent:
                if top is None or by_ok[i].token > top.token:
                    top = by_ok[i]
                i += 1
            if top is not None and g.token <= top.token:
                out.append("%s: token %d (sent %.3f) is not above token %d "
                           "acknowledged before (read %.3f)" %
                           (sem, g.token, g.t_sent, top.token, top.t_ok))
    return out


def check_tokens(ok, grants, what=""):
    probs = token_problems(grants)
    n = len([g for g in grants if not g.attach])
    return ok(not probs, "%stokens are unique and increasing per semaphore "
              "(%d grants)" % (what, n), "; ".join(probs[:5]))


def believed_leases(grants, t, margin):
    """Leases believed held from before t until after t + margin."""
    return [g for g in grants if g.kind == "lease" and g.t_ok < t and
            g.end(0) > t + margin]


def missing_leases(grants, held, t_asked, margin=0.3):
    """The leases clients still believed (from before t_asked until
    margin after it) that are not in held, a {sem: set(tokens)} read at
    about t_asked."""
    return [g for g in believed_leases(grants, t_asked, margin)
            if g.token not in held.get(g.sem, ())]


# --------------------------------------------------------------------------
# A monitor of what the daemons say
# --------------------------------------------------------------------------

class Monitor(threading.Thread):
    """Polls INFO of each semaphore on each port (every daemon that
    answers it): used never above capacity."""

    def __init__(self, ports, sems, stop):
        super().__init__(name="monitor", daemon=True)
        self.ports = list(ports)
        self.sems = list(sems)
        self.stop = stop          # () -> True when to stop
        self.over = []
        self.polls = 0
        self.error = None

    def run(self):
        conns = [None] * len(self.ports)
        try:
            while not self.stop():
                for i, port in enumerate(self.ports):
                    try:
                        if conns[i] is None:
                            conns[i] = connect(port, timeout=2)
                        for sem in self.sems:
                            r = conns[i].cmd("INFO " + sem)
                            if not r.startswith("OK "):
                                break
                            info = parse_kv(r[3:])
                            self.polls += 1
                            if int(info["used"]) > int(info["capacity"]):
                                self.over.append((port, info))
                    except (OSError, ConnClosed, ReplyTimeout):
                        if conns[i] is not None:
                            conns[i].close()
                        conns[i] = None
                time.sleep(0.1)
        except Exception:
            self.error = traceback.format_exc()
        finally:
            for c in conns:
                if c is not None:
                    c.close()


# --------------------------------------------------------------------------
# The chaos clients' requests (test_chaos.py, test_failover_chaos.py)
# --------------------------------------------------------------------------

def random_acquire(rng, sems):
    """One random request of a chaos client, drawn from rng in a fixed
    order (so a seed replays): (sem, n, lease_ms or None, the line)."""
    sem = rng.choice(sorted(sems))
    n = rng.choice((1, 1, 2))
    lease_ms = rng.randint(300, 1500) if rng.random() < 0.4 else None
    line = "ACQUIRE %s %d TIMEOUT %d" % (sem, n, rng.randint(50, 2000))
    if lease_ms is not None:
        line += " LEASE %d" % lease_ms
    return sem, n, lease_ms, line


def refusal_label(rep):
    """How a chaos client counts a reply that is not `OK <token>`."""
    return rep.split()[0] if rep.startswith("TIMEOUT") else \
        " ".join(rep.split()[:2])


def chaos_acquire(client, line, lost_label):
    """Send a chaos client's ACQUIRE (client.req, client.count) and count
    what came back: (token, send time, reply time) when granted, else
    None (refusals back off a little after an ERR)."""
    rep, t_sent, t_rep = client.req(line, 10)
    if rep is None:
        client.count(lost_label)
        return None
    m = re.fullmatch(r"OK ([0-9]+)", rep)
    if not m:
        client.count(refusal_label(rep))
        if rep.startswith("ERR"):
            time.sleep(0.05)
        return None
    client.count("grants")
    return int(m.group(1)), t_sent, t_rep


class ChaosClient(threading.Thread):
    """What the chaos clients of both chaos tests share: run() calls the
    subclass's loop() and keeps the traceback of an error (.error) for
    the checker, dropping the connection in the end; turns() paces loop():
    it stops when the run ends (.w.end, .w.stop) or connect() gives up."""

    def run(self):
        try:
            self.loop()
        except Exception:
            self.error = traceback.format_exc()
        finally:
            self.drop()

    def turns(self):
        for _ in range(100000):
            if now() >= self.w.end or self.w.stop:
                return
            if self.conn is None and not self.connect():
                return
            yield


# --------------------------------------------------------------------------
# The run's schedule and the checks the chaos tests end with
# --------------------------------------------------------------------------

def kill_and_restart(p, w, rng, on_kill=None):
    """kill -9 semd (p) and start it again after 2 to 5 s each (from the
    seeded rng) until w.end; on_kill() runs between the kill and the
    start. Returns (kills, up_ok): up_ok is False when semd was found dead
    before a kill (the run then stops killing)."""
    kills = 0
    for _ in range(100):
        nap = rng.uniform(2.0, 5.0)
        if now() + nap >= w.end:
            break
        time.sleep(nap)
        if not p.d.alive():
            return kills, False
        p.kill9()
        kills += 1
        if on_kill is not None:
            on_kill()
        p.start()
    return kills, True


def finish_run(w, threads):
    """The clients run until w.end; then each thread gets until 20 s past
    it to finish, and w.stop tells the stragglers to stop."""
    left = w.end - now()
    if left > 0:
        time.sleep(left)
    for th in threads:
        th.join(max(0.1, w.end + 20 - now()))
    w.stop = True


def check_threads(threads):
    """Every client and monitor thread finished, and none raised."""
    hung = [th.name for th in threads if th.is_alive()]
    ok(not hung, "every client thread finished", repr(hung))
    errors = [(th.name, th.error) for th in threads if th.error]
    ok(not errors, "no client thread raised", errors[:1])


def check_capacity(sem, cap, beliefs, t0):
    """(a) the grants clients believed they held never sum above cap."""
    bad = overbooked(beliefs, cap)
    ok(bad is None, "(a) %s: the grants clients believed held never "
       "sum above capacity %d (%d belief intervals)" %
       (sem, cap, len(beliefs)),
       bad and "at t=%.3f: %r" % (bad[0] - t0, [
           (b[4], b[1], b[5], round(b[2] - t0, 3),
            round(b[3] - t0, 3)) for b in bad[1]]))


def check_tokens_unique(acked):
    """(b) no token was acknowledged twice; acked: (token, gen, sem)."""
    toks = [a[0] for a in acked]
    dups = sorted(t for t in set(toks) if toks.count(t) > 1)
    ok(not dups, "(b) no token was acknowledged twice (%d tokens)" %
       len(toks), repr(dups[:10]))
