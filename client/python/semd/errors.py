"""The exceptions of the semd client, one per protocol error code.

Every refusal of semd (``ERR <CODE> text``) becomes an instance of the
class registered for CODE below, carrying ``code`` and semd's own text;
``TIMEOUT`` becomes :class:`NotGranted`. Failures of the transport keep
the two meanings libsemc(3) gives them apart:

* :class:`ConnectFailed` (an :class:`Unavailable`): no owner could be
  reached, the request was never sent: nothing happened, retrying is safe.
* :class:`ReplyLost`: the request was sent and its reply did not come;
  the outcome is unknown, and the client never sends it again. For an
  acquire this is :class:`AcquireLost`, also a :class:`PermitLost`: a
  permit may have been granted and lost.
"""

from typing import Dict, Optional, Type


class SemdError(Exception):
    """Any failure reported by the client. ``code`` is the protocol's
    error code (``"NOSEM"``...) or a word of the client's own
    (``"TIMEOUT"``, ``"CONNECT"``, ``"NOREPLY"``, ``"BADREPLY"``, ``"LOST"``)."""

    code = "ERR"

    def __init__(self, message: str, code: Optional[str] = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class NotGranted(SemdError):
    """``TIMEOUT``: the permit was not granted within the wait."""
    code = "TIMEOUT"


class NoSuchSemaphore(SemdError):
    """``ERR NOSEM``: no semaphore of that name."""
    code = "NOSEM"


class PermitLost(SemdError):
    """The permit is not held any more (revoked, expired, released by
    someone else, or lost with semd), or may never have reached us."""
    code = "LOST"


class NotHeld(PermitLost):
    """``ERR NOTHELD``: the token is not held (released, expired,
    revoked or never granted)."""
    code = "NOTHELD"


class Unavailable(SemdError):
    """``ERR UNAVAILABLE``: semd cannot reach its store; nothing was
    granted. Also the base of the failures that did nothing."""
    code = "UNAVAILABLE"


class ConnectFailed(Unavailable):
    """No owner could be reached within the failover timeout; the request
    was not sent, so nothing happened and retrying is safe."""
    code = "CONNECT"


class Standby(Unavailable):
    """``ERR STANDBY``: a standby refused (it did nothing). The client
    follows it to the owner; this is raised only when that search ends."""
    code = "STANDBY"


class ReplyLost(SemdError):
    """The request was sent and the connection failed before its reply:
    the outcome is unknown. The request is never sent again."""
    code = "NOREPLY"


class AcquireLost(PermitLost, ReplyLost):
    """The reply to an acquire was lost: a permit may have been granted
    and lost (a bound one is released with the connection; a lease runs
    out by itself)."""
    code = "LOST"


class ProtocolError(SemdError):
    """``ERR PROTO`` or ``ERR TOOLONG`` (a malformed request), or a reply
    the client cannot read (code ``BADREPLY``)."""
    code = "PROTO"


class AuthError(SemdError):
    """``ERR AUTH``: a password is needed, or it was wrong."""
    code = "AUTH"


class AlreadyExists(SemdError):
    """``ERR EXISTS``: the semaphore exists with another capacity (or a
    request id is in use with other values)."""
    code = "EXISTS"


class TooLarge(SemdError):
    """``ERR RANGE``: ``n`` is larger than the capacity; it could never be
    granted."""
    code = "RANGE"


class NotOwner(SemdError):
    """``ERR NOTOWNER``: the permit is bound to another live connection."""
    code = "NOTOWNER"


class NotLease(SemdError):
    """``ERR NOTLEASE``: ``REFRESH`` of a permit bound to its connection."""
    code = "NOTLEASE"


class Busy(SemdError):
    """``ERR BUSY``: ``DELETE`` of a semaphore with holders or waiters."""
    code = "BUSY"


class LimitReached(SemdError):
    """``ERR LIMIT``: a server limit (clients, waiters, semaphores)."""
    code = "LIMIT"


class NoSuchConnection(SemdError):
    """``ERR NOCONN``: ``KILL`` of a connection id that is not open."""
    code = "NOCONN"


_BY_CODE: Dict[str, Type[SemdError]] = {
    "PROTO": ProtocolError,
    "TOOLONG": ProtocolError,
    "AUTH": AuthError,
    "NOSEM": NoSuchSemaphore,
    "EXISTS": AlreadyExists,
    "RANGE": TooLarge,
    "NOTHELD": NotHeld,
    "NOTOWNER": NotOwner,
    "NOTLEASE": NotLease,
    "BUSY": Busy,
    "LIMIT": LimitReached,
    "UNAVAILABLE": Unavailable,
    "STANDBY": Standby,
    "NOCONN": NoSuchConnection,
}


def error_for(code: str, text: str) -> SemdError:
    """The exception for ``ERR <code> <text>``; an unknown code (a later
    semd) gives a plain :class:`SemdError` with that code."""
    cls = _BY_CODE.get(code, SemdError)
    msg = "%s (ERR %s)" % (text, code) if text else "ERR %s" % code
    return cls(msg, code)
