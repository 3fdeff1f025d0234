"""Where to connect, and the search for the owner among several semd, as
libsemc does it (README "Following a failover"):

* addresses come from ``hosts`` (a list, or ``"h1:7313,h2,[::1]:7400"``),
  else ``SEMD_HOSTS``, else ``127.0.0.1:7313``;
* a standby's ``ERR STANDBY owner=X`` sends the next attempt to X (X
  joins the list in one extra slot);
* after a whole round without an owner the search pauses 100 ms, doubling
  up to 1 s, until ``failover_timeout`` has passed.

:class:`Search` is pure: it says which address to try next and how long
to pause; the sync and asyncio clients do the waiting.
"""

import os
import time
from typing import Callable, List, Optional, Sequence, Tuple, Union

DEFAULT_PORT = 7313
BACKOFF_MIN = 0.1
BACKOFF_MAX = 1.0
REDIRECTS_MAX = 2       # per round: standbys may disagree

Address = Tuple[str, int]


def parse_address(text: str, default_port: int = DEFAULT_PORT) -> Address:
    """``host``, ``host:port``, ``[v6]``, ``[v6]:port`` or a bare IPv6
    address (no port) as (host, port); ValueError when malformed."""
    s = text.strip()
    if not s or any(ch.isspace() for ch in s):
        raise ValueError("invalid address %r in the host list" % text)
    host, port_text = s, ""
    if s.startswith("["):
        end = s.find("]")
        if end < 0:
            raise ValueError("invalid address %r: '[' without ']'" % text)
        host, rest = s[1:end], s[end + 1:]
        if rest:
            if not rest.startswith(":"):
                raise ValueError("invalid address %r" % text)
            port_text = rest[1:]
    elif s.count(":") == 1:
        host, port_text = s.split(":")
    if not host:
        raise ValueError("invalid address %r: no host" % text)
    port = default_port
    if port_text or s.endswith(":"):
        if not port_text.isdigit() or not 0 < int(port_text) <= 65535:
            raise ValueError("invalid address %r: port 1 to 65535" % text)
        port = int(port_text)
    return host, port


def address_list(hosts: Union[None, str, Sequence[str]]) -> List[Address]:
    """The addresses to try, from hosts, else SEMD_HOSTS, else the
    default. ValueError for a malformed or empty list."""
    if hosts is None:
        hosts = os.environ.get("SEMD_HOSTS") or "127.0.0.1"
    items = hosts.split(",") if isinstance(hosts, str) else list(hosts)
    out = [parse_address(h) for h in items]
    if not out:
        raise ValueError("empty host list")
    return out


def format_address(addr: Address) -> str:
    host, port = addr
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % addr


class Addresses:
    """The list given, plus the owner a standby named (one extra slot),
    and the index of the address in use. Shared by the connections of
    one client so that a reconnect starts where the owner was last."""

    def __init__(self, hosts: Union[None, str, Sequence[str]]) -> None:
        self.listed = address_list(hosts)
        self.addrs = list(self.listed)
        self.cur = 0
        self.seen_standby = False
        self.hint: Optional[int] = None     # the owner a standby named

    def many(self) -> bool:
        """A failed attempt is followed by a search (else: one attempt)."""
        return len(self.listed) > 1 or self.seen_standby

    def current(self) -> Address:
        return self.addrs[self.cur % len(self.addrs)]

    def learn_owner(self, owner: Optional[str]) -> Optional[int]:
        """A standby named owner: its index (added if new), or None."""
        self.seen_standby = True
        self.hint = None
        if owner is None:
            return None
        try:
            a = parse_address(owner)
        except ValueError:
            return None
        if a in self.addrs:
            self.hint = self.addrs.index(a)
        elif len(self.addrs) > len(self.listed):
            self.addrs[len(self.listed)] = a
            self.hint = len(self.listed)
        else:
            self.addrs.append(a)
            self.hint = len(self.listed)
        return self.hint


class Search:
    """One search for the owner. After a failed attempt (``standby``
    True when a standby refused and named ``owner_index``), call
    :meth:`next`: None to give up, else the pause in seconds (0 for
    none) before trying ``addresses.current()``. A single address that
    never met a standby gets one attempt, unless always is set (the
    keeper's re-attach, which waits for a restarting semd)."""

    def __init__(self, addresses: Addresses, timeout: Optional[float],
                 clock: Callable[[], float] = time.monotonic,
                 always: bool = False) -> None:
        self.a = addresses
        self.always = always
        self.clock = clock
        self.deadline: Optional[float] = None if timeout is None \
            else clock() + timeout
        self.delay = BACKOFF_MIN
        self.left = len(addresses.addrs)
        self.redirects = 0
        self.rounds = 0

    def next(self, owner_index: Optional[int] = None) -> Optional[float]:
        a = self.a
        if not a.many() and not self.always:
            return None
        now = self.clock()
        if self.deadline is not None and now >= self.deadline:
            return None
        if owner_index is not None and owner_index != a.cur and \
                self.redirects < REDIRECTS_MAX:
            a.cur = owner_index
            self.redirects += 1
            return 0.0
        a.cur = (a.cur + 1) % len(a.addrs)
        if self.left > 1:
            self.left -= 1
            return 0.0
        # A whole round and no owner: pause, then go round again.
        self.rounds += 1
        if self.deadline is None:
            return None
        pause = min(self.delay, max(0.0, self.deadline - now))
        self.delay = min(self.delay * 2, BACKOFF_MAX)
        self.left = len(a.addrs)
        self.redirects = 0
        return pause

    def give_up_text(self) -> str:
        n = len(self.a.addrs)
        if self.deadline is None:
            return "no owner among %d addresses (one pass)" % n
        return "no owner within the failover timeout (%d rounds over %d " \
               "addresses)" % (self.rounds, n)
