"""The keeper of a synchronous client's permits: one thread that

* keeps each lease: ``REFRESH`` a third of the lease after the last one
  was sent (so two refreshes can fail in a row before it would run out),
  on a connection of its own; and
* watches each permit, bound or leased: a ``WATCH`` on a connection of
  its own per held permit (reused for the next permit once answered),
  so ``permit.lost`` is set within a round trip of a ``REVOKE``, the end
  of a lease, or the close of the holding connection.

A permit is lost, for good, when semd says so (WATCH's reason, ERR
NOTHELD on REFRESH or on ATTACH after a reconnect), when a lease's known
end passes without a refresh, or when a bound permit's connection cannot
be opened again (re-ATTACHing it) within the failover timeout.

When a bound permit's WATCH connection fails, semd may have restarted or
a standby taken over: a short-lived thread reopens the permit's own
connection, which ATTACHes its permits again (connection.py), and the
keeper WATCHes them there. So a bound permit is taken back within
``reclaim-grace`` even when its holder makes no call.
"""

import logging
import selectors
import socket
import threading
import time
from typing import TYPE_CHECKING, Dict, List, Tuple

from . import protocol
from .connection import Connection
from .errors import NotHeld, SemdError
from .hosts import Search

if TYPE_CHECKING:
    from .client import Client
    from .permit import Permit

WATCH_RETRY = 0.5       # seconds between attempts to WATCH again
WATCH_CONNECT = 1.0     # the keeper's search for the owner, per attempt
IDLE_MAX = 64           # spare WATCH connections kept for reuse

log = logging.getLogger("semd")


class Keeper:
    """Started by the client with its first permit; stop() ends it."""

    def __init__(self, client: "Client") -> None:
        self.client = client
        self._lock = threading.Lock()
        self._adds: List[Tuple[float, "Permit"]] = []
        self._stop = False
        self._r, self._w = socket.socketpair()
        self._r.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._r, selectors.EVENT_READ, None)
        # The thread's own state.
        self._watching: Dict[int, Tuple["Permit", Connection]] = {}
        self._idle: List[Connection] = []
        self._leases: List["Permit"] = []
        self._next: Dict[int, float] = {}        # id(permit) -> refresh at
        self._end: Dict[int, float] = {}         # id(permit) -> lease end
        self._retry: List[Tuple[float, "Permit"]] = []
        self._conn = client._new_conn(keeper=True)
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="semd-keeper")
        self._thread.start()

    # -- called from other threads ----------------------------------------

    def add(self, permit: "Permit", delay: float = 0.0) -> None:
        """Watch permit (and keep its lease), after delay seconds."""
        with self._lock:
            self._adds.append((time.monotonic() + delay, permit))
        self._poke()

    def _poke(self) -> None:
        try:
            self._w.send(b"x")
        except OSError:
            pass

    def stop(self) -> None:
        with self._lock:
            self._stop = True
        self._poke()
        if threading.current_thread() is not self._thread:
            self._thread.join(5)
        for _, conn in list(self._watching.values()):
            conn.close()
        for conn in self._idle:
            conn.close()
        self._conn.close()
        self._sel.close()
        self._r.close()
        self._w.close()

    # -- the thread ---------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stop:
                    return
            try:
                self._turn()
            except Exception:
                # A keeper that died would leave permit.lost unset for
                # ever: say what happened, and go on.
                with self._lock:
                    if self._stop:
                        return
                log.exception("semd keeper: unexpected error; going on")
                time.sleep(WATCH_RETRY)

    def _turn(self) -> None:
        """One turn: take new permits, refresh and watch what is due,
        wait for an answer or the next due time."""
        with self._lock:
            adds, self._adds = self._adds, []
        now = time.monotonic()
        for at, p in adds:
            if p.lease_ms is not None and id(p) not in self._end:
                self._leases.append(p)
                # The lease began when semd granted it, after the
                # acquire was sent: count from the sending.
                self._end[id(p)] = p.sent_at + p.lease_ms / 1000.0
                self._next[id(p)] = p.sent_at + p.lease_ms / 3000.0
            self._retry.append((at, p))
        self._refresh_due()
        self._watch_due()
        for key, _ in self._sel.select(self._timeout()):
            if key.data is None:
                try:
                    while self._r.recv(4096):
                        pass
                except OSError:
                    pass
            else:
                self._answered(key.fileobj)     # type: ignore[arg-type]

    def _timeout(self) -> float:
        now = time.monotonic()
        t = now + 1.0
        for at in self._next.values():
            t = min(t, at)
        for at, _ in self._retry:
            t = min(t, at)
        return max(0.0, t - now)

    def _done(self, p: "Permit") -> bool:
        return p.released or p.lost.is_set()

    # -- watches ------------------------------------------------------------

    def _watch_due(self) -> None:
        now = time.monotonic()
        due = [p for at, p in self._retry if at <= now]
        self._retry = [(at, p) for at, p in self._retry if at > now]
        for p in due:
            if not self._done(p):
                self._watch(p)

    def _watch(self, p: "Permit") -> None:
        """Send WATCH for p on a spare connection (or a new one)."""
        conn = self._idle.pop() if self._idle else \
            self.client._new_conn(keeper=True)
        try:
            with conn.lock:
                if conn.broken():
                    conn.open(Search(conn.addresses, WATCH_CONNECT))
                conn.send_line(protocol.token_line("WATCH", p.sem,
                                                   p.token))
        except Exception:
            conn.close()
            self._idle.append(conn)
            self._watch_failed(p)
            return
        self._watching[conn.fileno()] = (p, conn)
        self._sel.register(conn.fileno(), selectors.EVENT_READ, conn)

    def _watch_failed(self, p: "Permit") -> None:
        """The WATCH connection failed: semd may be gone. A bound permit
        is re-attached by the thread that reopens its connection, which
        hands it back here; a lease is kept by its refreshes meanwhile."""
        if self._done(p):
            return
        if p.bound:
            self.client._reattach_later(p)
        else:
            self._retry.append((time.monotonic() + WATCH_RETRY, p))

    def _answered(self, fd: int) -> None:
        p, conn = self._watching.pop(fd)
        self._sel.unregister(fd)
        try:
            reply = conn.read_reply(0)
        except SemdError:
            conn.close()
            if len(self._idle) < IDLE_MAX:
                self._idle.append(conn)
            self._watch_failed(p)
            return
        if len(self._idle) < IDLE_MAX:
            self._idle.append(conn)
        else:
            conn.close()
        if reply.kind == "OK":
            p._lose(reply.words[0] if reply.words else "ended")
        elif reply.kind == "ERR" and reply.code == "NOTHELD":
            p._lose("notheld")
        elif reply.kind == "ERR" and reply.code in ("STANDBY",
                                                    "UNAVAILABLE"):
            conn.close()
            self._watch_failed(p)
        # Another ERR (a semd without WATCH): refreshes only.

    # -- leases -------------------------------------------------------------

    def _refresh_due(self) -> None:
        now = time.monotonic()
        for p in list(self._leases):
            if self._done(p):
                self._forget(p)
                continue
            if self._next[id(p)] > now:
                continue
            self._refresh(p)

    def _forget(self, p: "Permit") -> None:
        self._leases.remove(p)
        self._next.pop(id(p), None)
        self._end.pop(id(p), None)

    def _refresh(self, p: "Permit") -> None:
        assert p.lease_ms is not None
        lease = p.lease_ms / 1000.0
        sent = time.monotonic()
        end = self._end[id(p)]
        self._conn.failover_timeout = max(0.1, end - sent)
        try:
            reply = self._conn.call(protocol.token_line(
                "REFRESH", p.sem, p.token, str(p.lease_ms)))
            err = None if reply.kind == "OK" else reply.error()
        except SemdError as e:
            err = e
        if err is None:
            self._end[id(p)] = sent + lease
            self._next[id(p)] = sent + lease / 3
            return
        if isinstance(err, NotHeld):
            p._lose("expired")
            self._forget(p)
            return
        now = time.monotonic()
        if now >= end:
            p._lose("unreachable")
            self._forget(p)
            return
        # Not extended (semd out of reach, its store down): soon again.
        self._next[id(p)] = now + min(lease / 3, WATCH_RETRY)
