"""What an acquire sends, and when it is sent again: shared by the sync
and asyncio clients, as libsemc's semc-acquire.c does it.

Every leased acquire carries an ``ID``, the caller's or 128 random bits
drawn here, so that its reply may be lost without losing the lease: semd
answers a repeat with the same id by the token it granted and grants
nothing more (PROTOCOL "Idempotent lease acquire"). When the reply is
lost the request is sent again, on a new connection, with the same id
and what is left of the caller's timeout, for as long as
failover_timeout after the first loss (pausing 100 ms, doubling up to
1 s, between tries). A bound acquire (no lease) takes no id: its permit
dies with the connection, so a lost reply stays AcquireLost.
"""

import re
import secrets
import time
from typing import Dict, Iterable, Mapping, Optional, Tuple, Union

from . import protocol

ALL_MAX = 16            # ACQUIREALL: 2 to 16 semaphores
RETRY_FIRST = 0.1       # pause before the second retry, seconds
RETRY_MAX = 1.0         # doubling up to this

_ID_RE = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")

#: The semaphores of acquire_all: {name: n}, or (name, n) pairs.
Parts = Union[Mapping[str, int], Iterable[Tuple[str, int]]]


def check_parts(parts: Parts) -> Dict[str, int]:
    """acquire_all's semaphores as an ordered {name: n}, checked: 2 to 16
    distinct valid names, each n from 1; else ValueError."""
    pairs = list(parts.items()) if isinstance(parts, Mapping) \
        else list(parts)
    out: Dict[str, int] = {}
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ValueError("acquire_all: (name, n) pairs or a {name: n} "
                             "dict, not %r" % (pair,))
        name, n = pair
        protocol.check_name(name)
        protocol.check_count(n)
        if name in out:
            raise ValueError("acquire_all: semaphore %r named twice"
                             % (name,))
        out[name] = n
    if not 2 <= len(out) <= ALL_MAX:
        raise ValueError("acquire_all: 2 to %d semaphores, not %d"
                         % (ALL_MAX, len(out)))
    return out


class AcquireRequest:
    """One acquire as the caller asked for it: ``ACQUIRE`` (``TRY`` when
    timeout_ms is 0) of one semaphore, or ``ACQUIREALL`` of several; the
    request id settled (given, drawn for a lease, or none)."""

    def __init__(self, parts: Dict[str, int], multi: bool,
                 timeout_ms: Optional[int], lease_ms: Optional[int],
                 request_id: Optional[str]) -> None:
        self.parts = parts
        self.multi = multi
        self.timeout_ms = timeout_ms
        self.lease_ms = lease_ms
        self.drawn = False
        if request_id is not None:
            if lease_ms is None:
                raise ValueError("a request id goes only with a lease")
            if not isinstance(request_id, str) or \
                    not _ID_RE.fullmatch(request_id):
                raise ValueError("request id %r: 1 to 64 characters of "
                                 "A-Z a-z 0-9 _ . : / -" % (request_id,))
            self.id: Optional[str] = request_id
        elif lease_ms is not None:
            self.id = secrets.token_hex(16)
            self.drawn = True
        else:
            self.id = None
        self.started = time.monotonic()

    @property
    def first(self) -> Tuple[str, int]:
        """The semaphore the permit is named by (any one names a grant)."""
        return next(iter(self.parts.items()))

    def timeout_left(self, retrying: bool) -> Optional[int]:
        """The TIMEOUT to send: the caller's, or after a loss what is left
        of it since the first send (never below 0)."""
        if self.timeout_ms is None or not retrying:
            return self.timeout_ms
        spent = int((time.monotonic() - self.started) * 1000)
        return max(0, self.timeout_ms - spent)

    def line(self, timeout_ms: Optional[int], with_id: bool) -> str:
        """The request line, with this TIMEOUT and, if with_id, the ID."""
        if self.multi:
            line = "ACQUIREALL " + " ".join(
                "%s %d" % p for p in self.parts.items())
            if timeout_ms is not None:
                line += " TIMEOUT %d" % timeout_ms
            if self.lease_ms is not None:
                line += " LEASE %d" % self.lease_ms
        else:
            name, n = self.first
            line = protocol.acquire_line(name, n, timeout_ms, self.lease_ms)
        if with_id and self.id is not None:
            line += " ID %s" % self.id
        return line


class LostReplyRetry:
    """After a reply was lost: may the request be sent again, and after
    what pause? failover is the client's failover_timeout in seconds
    (None: one retry)."""

    def __init__(self, failover: Optional[float]) -> None:
        self.failover = failover
        self.lost_at: Optional[float] = None
        self.retries = 0
        self.delay = RETRY_FIRST

    def next_pause(self) -> Optional[float]:
        """None: give up; else the seconds to pause before sending again
        (0 before the first retry)."""
        now = time.monotonic()
        if self.lost_at is None:
            self.lost_at = now
        self.retries += 1
        if self.failover is None:
            return 0.0 if self.retries == 1 else None
        left = self.lost_at + self.failover - now
        if left <= 0:
            return None
        if self.retries == 1:
            return 0.0
        pause = min(self.delay, left)
        self.delay = min(self.delay * 2, RETRY_MAX)
        return pause

    def give_up_text(self, request_id: str) -> str:
        return ("ID %s: not answered when sent again for %s s (an acquire "
                "with this ID learns the token while the lease lasts)"
                % (request_id, self.failover))
