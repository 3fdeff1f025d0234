"""A permit held from semd, for the synchronous client: its token (a
fencing token to pass to the guarded resource), ``lost`` (a
threading.Event the keeper sets the moment semd says the permit ended
without us: revoked, expired, released by someone else, its connection
closed, not given back after a restart or failover), and release().
Used as a context manager it is released when the block ends, also on
an exception.
"""

import threading
from typing import TYPE_CHECKING, Any, Dict, Optional

from . import protocol
from .errors import NotHeld, PermitLost, SemdError

if TYPE_CHECKING:
    from .client import Client
    from .connection import Connection


class Permit:
    """A granted permit. ``sem``, ``n``, ``token``; ``lease`` in seconds
    (None: bound to its connection, released by semd if this process
    dies); ``lost`` and ``lost_reason`` (``"revoked"``, ``"expired"``,
    ``"released"``, ``"closed"``, ``"unclaimed"``, ``"notheld"``,
    ``"unreachable"``...)."""

    def __init__(self, client: "Client", sem: str, n: int, token: int,
                 lease_ms: Optional[int],
                 conn: Optional["Connection"], sent_at: float) -> None:
        self.client = client
        self.sem = sem
        self.n = n
        self.token = token
        self.lease_ms = lease_ms
        self.lease: Optional[float] = None if lease_ms is None \
            else lease_ms / 1000.0
        #: every semaphore of the grant and its n (acquire_all: several;
        #: sem and n are the first, and name the whole grant)
        self.parts: Dict[str, int] = {sem: n}
        self.lost = threading.Event()
        self.lost_reason: Optional[str] = None
        self.released = False
        self._conn = conn               # the connection it is bound to
        self.sent_at = sent_at          # monotonic time the acquire left
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        state = "released" if self.released else \
            "lost (%s)" % self.lost_reason if self.lost.is_set() else "held"
        return "<Permit %s n=%d token=%d %s%s>" % (
            self.sem, self.n, self.token,
            "lease=%gs " % self.lease if self.lease is not None else "",
            state)

    @property
    def bound(self) -> bool:
        """True for a permit bound to its connection (no lease)."""
        return self.lease_ms is None

    def _lose(self, reason: str) -> None:
        """The keeper (or a reply) learned that the permit ended."""
        with self._lock:
            if self.released or self.lost.is_set():
                return
            self.lost_reason = reason
        self.lost.set()

    def raise_if_lost(self) -> None:
        """PermitLost if the permit was lost: call it before acting on
        the guarded resource."""
        if self.lost.is_set():
            raise PermitLost("the permit %s token %d was lost: %s" % (
                self.sem, self.token, self.lost_reason))

    def check(self) -> Dict[str, str]:
        """semd's ``CHECK``: ``n``, ``kind``, ``ttl_ms`` while held; NotHeld
        (a PermitLost) when it is not."""
        return self.client.check(self.sem, self.token)

    def refresh(self, lease: Optional[protocol.Duration] = None) -> float:
        """Extend the lease now (the keeper does it by itself); the lease
        then ends that many seconds from now."""
        if self.lease_ms is None:
            raise ValueError("a bound permit has no lease to refresh")
        ms = self.lease_ms if lease is None else \
            protocol.to_ms(lease, "lease", 1)
        r = self.client._plain(protocol.token_line(
            "REFRESH", self.sem, self.token, str(ms)))
        if r.kind != "OK":
            err = r.error()
            if isinstance(err, NotHeld):
                self._lose("notheld")
            raise err
        return int(r.words[0]) / 1000.0 if r.words and \
            r.words[0].isdigit() else ms / 1000.0

    def release(self) -> None:
        """Give the permit back. Once only (later calls do nothing).
        Raises PermitLost (NotHeld) when semd no longer held it: whatever
        was done under it may have overlapped another holder."""
        with self._lock:
            if self.released:
                return
            self.released = True
        self.client._release(self)

    def __enter__(self) -> "Permit":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.release()
        except SemdError:
            if exc_type is None:
                raise
            # Do not hide the exception that ended the block.
