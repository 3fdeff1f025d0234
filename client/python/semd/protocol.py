"""The wire protocol of semd, as pure functions: durations in seconds to
the wire's milliseconds, request lines, and reply lines parsed. No
sockets here; the sync and asyncio clients share all of it.

The contract is semd's PROTOCOL (README "Protocol"): one request line,
one reply: ``OK ...``, ``OK <k>`` and k ``key=value`` lines for a
listing, ``TIMEOUT``, or ``ERR <CODE> text``. Unknown ``key=value`` pairs
and extra words after ``OK`` are ignored, so a later semd can add them.
"""

import math
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Dict, List, Optional, Union

from .errors import NotGranted, ProtocolError, SemdError, error_for

#: A duration as a person writes it in Python: seconds, or a timedelta.
Duration = Union[int, float, timedelta]

MS_MAX = 2**31 - 1
N_MAX = 2**31 - 1

_NAME_RE = re.compile(r"[A-Za-z0-9_.:/-]{1,200}")
_LABEL_RE = re.compile(r"[A-Za-z0-9_.:/@-]{1,64}")


def to_ms(value: Duration, what: str, minimum_ms: int = 0) -> int:
    """A duration (seconds as int/float, or a timedelta) as the wire's
    whole milliseconds, rounded up so that a wait or a lease is never
    shorter than asked. ValueError for a negative, non-finite or too long
    duration, TypeError for anything else (a bool included: ``True``
    seconds is a mistake, not a duration)."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError("%s: a number of seconds or a timedelta, not %r"
                        % (what, value))
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError("%s: %r is not a duration (seconds >= 0)"
                         % (what, value))
    ms = math.ceil(round(seconds * 1000.0, 6))
    if ms < minimum_ms:
        raise ValueError("%s: %r is shorter than %d ms" % (what, value,
                                                          minimum_ms))
    if ms > MS_MAX:
        raise ValueError("%s: %r is longer than semd accepts (%d ms)"
                         % (what, value, MS_MAX))
    return ms


def check_name(sem: str) -> str:
    """A semaphore name as the protocol allows it, else ValueError."""
    if not isinstance(sem, str) or not _NAME_RE.fullmatch(sem):
        raise ValueError("semaphore name %r: 1 to 200 characters of "
                         "A-Z a-z 0-9 _ . : / -" % (sem,))
    return sem


def check_label(label: str) -> str:
    """A connection label for ``NAME``, else ValueError."""
    if not isinstance(label, str) or not _LABEL_RE.fullmatch(label):
        raise ValueError("client name %r: 1 to 64 characters of "
                         "A-Z a-z 0-9 _ . : / - @" % (label,))
    return label


def check_count(n: int, what: str = "n", minimum: int = 1) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or \
            not minimum <= n <= N_MAX:
        raise ValueError("%s: an integer from %d to %d, not %r"
                         % (what, minimum, N_MAX, n))
    return n


def check_token(token: int) -> int:
    if not isinstance(token, int) or isinstance(token, bool) or \
            not 0 <= token < 2**64:
        raise ValueError("token: an unsigned 64-bit integer, not %r"
                         % (token,))
    return token


def acquire_line(sem: str, n: int, timeout_ms: Optional[int],
                 lease_ms: Optional[int]) -> str:
    """``ACQUIRE`` (or ``TRY`` when timeout_ms is 0) with its options."""
    check_name(sem)
    check_count(n)
    if timeout_ms == 0:
        line = "TRY %s %d" % (sem, n)
    else:
        line = "ACQUIRE %s %d" % (sem, n)
        if timeout_ms is not None:
            line += " TIMEOUT %d" % timeout_ms
    if lease_ms is not None:
        line += " LEASE %d" % lease_ms
    return line


def token_line(verb: str, sem: str, token: int, *rest: str) -> str:
    """``VERB <sem> <token> [rest...]`` (RELEASE, CHECK, ATTACH...)."""
    check_name(sem)
    check_token(token)
    return " ".join((verb, sem, str(token)) + rest)


@dataclass
class Reply:
    """One reply: kind ``OK``, ``TIMEOUT`` or ``ERR``; the words after
    ``OK`` (or, for ERR, the code and semd's text); listing lines, when
    the request was a listing, are filled in by the caller."""
    kind: str
    words: List[str] = field(default_factory=list)
    code: str = ""
    text: str = ""
    lines: List[Dict[str, str]] = field(default_factory=list)

    def error(self) -> SemdError:
        """The exception this reply means (TIMEOUT or ERR)."""
        if self.kind == "TIMEOUT":
            return NotGranted("not granted in time")
        return error_for(self.code, self.text)

    def ok(self) -> "Reply":
        """self if OK, else raise the error it means."""
        if self.kind != "OK":
            raise self.error()
        return self

    def kv(self) -> Dict[str, str]:
        """The ``key=value`` words of an OK reply."""
        return parse_kv(self.words)


def parse_reply(line: str) -> Reply:
    """A reply line (without its newline) parsed; ProtocolError (code
    BADREPLY) for a line semd never sends."""
    words = line.split()
    if not words:
        raise ProtocolError("empty reply line", "BADREPLY")
    if words[0] == "OK":
        return Reply("OK", words[1:])
    if words[0] == "TIMEOUT" and len(words) == 1:
        return Reply("TIMEOUT")
    if words[0] == "ERR" and len(words) >= 2:
        text = line.split(None, 2)[2].strip() if len(words) > 2 else ""
        return Reply("ERR", code=words[1], text=text)
    raise ProtocolError("unexpected reply %r" % line[:60], "BADREPLY")


def listing_count(reply: Reply) -> int:
    """k of an ``OK <k>`` listing reply, else ProtocolError."""
    if reply.words and reply.words[0].isdigit():
        return int(reply.words[0])
    raise ProtocolError("expected 'OK <count>', got 'OK %s'"
                        % " ".join(reply.words)[:60], "BADREPLY")


def parse_kv(words: List[str]) -> Dict[str, str]:
    """``key=value`` words as a dict; other words are skipped."""
    out = {}
    for w in words:
        k, sep, v = w.partition("=")
        if sep:
            out[k] = v
    return out


def parse_token(reply: Reply) -> int:
    """The token of an ``OK <token>`` reply."""
    if reply.words and reply.words[0].isdigit():
        return int(reply.words[0])
    raise ProtocolError("expected 'OK <token>', got 'OK %s'"
                        % " ".join(reply.words)[:60], "BADREPLY")


def standby_owner(reply: Reply) -> Optional[str]:
    """The ``owner=`` of an ``ERR STANDBY`` reply, None when it is ``-``
    or absent."""
    kv = parse_kv(reply.text.split())
    owner = kv.get("owner")
    return owner if owner and owner != "-" else None
