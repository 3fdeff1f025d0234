"""One blocking connection to the owner semd, for the synchronous
client: open it (AUTH, NAME, ATTACH again the permits bound to it, the
search for the owner of hosts.py), and :meth:`Connection.call`, the one
place a request meets the network, which decides what a failure means,
with libsemc's rules:

* a connection found closed before sending is opened again first;
* a request that could not be sent, or that a standby refused (it did
  nothing), is sent again on a new connection to the owner, for as long
  as the search lasts;
* a request whose reply was lost is never sent again: ReplyLost
  (AcquireLost for an acquire), and the connection is closed, so that no
  later reply is read for the wrong request.

Each connection has its own lock; the client gives a connection to one
caller at a time, and the lock orders that caller against the keeper's
re-attach after a reconnect.
"""

import select
import socket
import threading
import time
from typing import Any, Callable, List, Optional

from . import protocol
from .errors import (AcquireLost, ConnectFailed, ProtocolError, ReplyLost,
                     SemdError, Standby)
from .hosts import Addresses, Search, format_address

MAX_REPLY_LINE = 1 << 20        # no semd reply line is near this

#: Called with (permit, exception) for a bound permit semd will not give
#: back on ATTACH after a reconnect.
LostFn = Callable[[object, SemdError], None]


class _IOFailed(Exception):
    """The connection failed (closed, timed out, reset)."""


def reply_lost(cause: Exception, acquire: bool) -> SemdError:
    """The error for a reply that never came: for an acquire, a permit may
    have been granted and lost; otherwise the outcome is unknown. Never
    sent again (libsemc(3)'s rule)."""
    if acquire:
        return AcquireLost("the reply to an acquire was lost (%s): a permit "
                           "may have been granted and lost" % cause)
    return ReplyLost("the reply was lost (%s): the outcome is unknown" %
                     cause)


class ConnectionSettings:
    """What a connection, sync or asyncio, is opened with, and the permits
    bound to it (``bound``: objects with ``sem`` and ``token``), which are
    ATTACHed again whenever it is reopened."""

    def __init__(self, addresses: Addresses, password: Optional[str],
                 name: Optional[str], connect_timeout: float,
                 io_timeout: float, failover_timeout: Optional[float],
                 on_lost: Optional[LostFn] = None) -> None:
        self.addresses = addresses
        self.password = password
        self.name = name
        self.connect_timeout = connect_timeout
        self.io_timeout = io_timeout
        self.failover_timeout = failover_timeout
        self.on_lost = on_lost
        self.bound: List[Any] = []
        self.ever_connected = False

    def close(self) -> None:
        raise NotImplementedError

    def after_reply(self, reply: protocol.Reply) -> protocol.Reply:
        """What an error reply means for the connection: TOOLONG closes it
        (semd closes it too), STANDBY names the owner to try next."""
        if reply.kind == "ERR":
            if reply.code == "TOOLONG":
                self.close()
            elif reply.code == "STANDBY":
                self.addresses.learn_owner(protocol.standby_owner(reply))
        return reply


class Connection(ConnectionSettings):
    """A connection that knows how to reach the owner (ConnectionSettings
    says with what)."""

    def __init__(self, addresses: Addresses, password: Optional[str],
                 name: Optional[str], connect_timeout: float,
                 io_timeout: float, failover_timeout: Optional[float],
                 on_lost: Optional[LostFn] = None) -> None:
        super().__init__(addresses, password, name, connect_timeout,
                         io_timeout, failover_timeout, on_lost)
        self.lock = threading.RLock()
        self.sock: Optional[socket.socket] = None
        self.buf = bytearray()

    # -- the socket ------------------------------------------------------

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None
        self.buf.clear()

    def broken(self) -> bool:
        """No connection, or semd closed it (or sent something unasked,
        which only a closing semd does)."""
        if self.sock is None:
            return True
        if self.buf:
            return True
        try:
            r, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(r)

    def fileno(self) -> int:
        return self.sock.fileno() if self.sock is not None else -1

    def _connect_once(self) -> None:
        host, port = self.addresses.current()
        try:
            s = socket.create_connection((host, port), self.connect_timeout)
        except OSError as e:
            raise ConnectFailed("cannot connect to %s: %s" % (
                format_address((host, port)), e.strerror or e)) from None
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        self.sock = s
        self.buf.clear()

    def send_line(self, line: str) -> None:
        """Send one whole request line; _IOFailed (and closed) if not."""
        if self.sock is None:
            raise _IOFailed("not connected")
        try:
            self.sock.settimeout(self.io_timeout)
            self.sock.sendall(line.encode() + b"\n")
        except OSError as e:
            self.close()
            raise _IOFailed(str(e)) from None

    def read_line(self, wait: Optional[float]) -> str:
        """The next reply line within io_timeout + wait (None: no bound);
        _IOFailed (and closed) if it does not come."""
        deadline = None if wait is None else \
            time.monotonic() + self.io_timeout + wait
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line = bytes(self.buf[:nl]).rstrip(b"\r")
                del self.buf[:nl + 1]
                return line.decode("utf-8", "replace")
            if len(self.buf) > MAX_REPLY_LINE or self.sock is None:
                self.close()
                raise _IOFailed("reply line too long")
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                self.close()
                raise _IOFailed("no reply in time")
            try:
                self.sock.settimeout(left)
                data = self.sock.recv(65536)
            except OSError as e:
                self.close()
                raise _IOFailed(str(e) or "timed out") from None
            if not data:
                self.close()
                raise _IOFailed("semd closed the connection")
            self.buf += data

    def read_reply(self, wait: Optional[float], listing: bool = False,
                   acquire: bool = False) -> protocol.Reply:
        """The reply of the request sent last. A lost reply is ReplyLost
        (AcquireLost when acquire); an unreadable one ProtocolError; both
        close the connection."""
        try:
            reply = protocol.parse_reply(self.read_line(wait))
            if listing and reply.kind == "OK":
                k = protocol.listing_count(reply)
                reply.lines = [protocol.parse_kv(self.read_line(0).split())
                               for _ in range(k)]
        except _IOFailed as e:
            raise reply_lost(e, acquire) from None
        except ProtocolError:
            self.close()
            raise
        return self.after_reply(reply)

    # -- opening ---------------------------------------------------------

    def _handshake(self, line: str) -> protocol.Reply:
        """One request while opening; a lost reply means "cannot
        connect" (the caller's own request was not sent)."""
        try:
            self.send_line(line)
            return self.read_reply(0)
        except (_IOFailed, ReplyLost, ProtocolError) as e:
            self.close()
            raise ConnectFailed("connected, then failed during %s: %s"
                                % (line.split()[0], e)) from None

    def _open_once(self) -> None:
        """Connect to the current address, AUTH, NAME, and ATTACH the
        bound permits. ConnectFailed or Standby: try elsewhere."""
        self.close()
        self._connect_once()
        if self.password is not None:
            r = self._handshake("AUTH " + self.password)
            if r.kind != "OK":
                self.close()
                raise r.error()
        if self.name is not None:
            r = self._handshake("NAME " + self.name)
            # A standby refuses; an older semd does not know NAME: a
            # label only helps operators, so only the standby matters.
            if r.kind == "ERR" and r.code == "STANDBY":
                self.close()
                raise r.error()
        if self.ever_connected and self.bound:
            self._reattach()
        self.ever_connected = True

    def _reattach(self) -> None:
        """ATTACH every bound permit again. semd's ERR means it will not
        give it back: lost (told to on_lost). A standby's refusal, or an
        I/O failure, keeps them all for the next attempt."""
        for permit in list(self.bound):
            r = self._handshake(protocol.token_line("ATTACH", permit.sem,
                                                    permit.token))
            if r.kind == "OK":
                continue
            if r.code == "STANDBY":
                self.close()
                raise r.error()
            self.bound.remove(permit)
            if self.on_lost is not None:
                self.on_lost(permit, r.error())

    def open(self, search: Optional[Search] = None) -> None:
        """Open a connection to the owner, searching as the addresses
        allow; ConnectFailed (or Standby, AuthError...) when it cannot."""
        if search is None:
            search = Search(self.addresses, self.failover_timeout)
        while True:
            try:
                self._open_once()
                return
            except (ConnectFailed, Standby) as e:
                owner = self.addresses.hint \
                    if isinstance(e, Standby) else None
                pause = search.next(owner)
                if pause is None:
                    if self.addresses.many():
                        raise ConnectFailed("%s; last: %s" % (
                            search.give_up_text(), e)) from None
                    raise
                if pause > 0:
                    time.sleep(pause)

    # -- requests --------------------------------------------------------

    def call(self, line: str, wait: Optional[float] = 0,
             listing: bool = False, acquire: bool = False) -> protocol.Reply:
        """Send line and return its reply (OK, TIMEOUT or ERR: the caller
        decides). wait: how long semd may take besides I/O (an acquire's
        timeout; None for ever). Raises ConnectFailed (nothing was sent),
        ReplyLost/AcquireLost (the outcome is unknown), ProtocolError."""
        with self.lock:
            search = Search(self.addresses, self.failover_timeout)
            reopened = False
            if self.broken():
                self.open(search)
                reopened = True
            while True:
                try:
                    self.send_line(line)
                except _IOFailed as e:
                    # semd never saw a whole line: nothing was done.
                    if reopened and not self.addresses.many():
                        raise ConnectFailed("cannot send: %s" % e) \
                            from None
                    self._next_or_raise(search, None, e)
                    self.open(search)
                    reopened = True
                    continue
                reply = self.read_reply(wait, listing, acquire)
                if reply.kind == "ERR" and reply.code == "STANDBY":
                    self.close()
                    self._next_or_raise(search, self.addresses.hint,
                                        reply.error())
                    self.open(search)
                    reopened = True
                    continue
                return reply

    def _next_or_raise(self, search: Search, owner: Optional[int],
                       why: Exception) -> None:
        pause = search.next(owner)
        if pause is None:
            if isinstance(why, SemdError):
                raise why
            raise ConnectFailed("%s; last: %s" % (search.give_up_text(),
                                                  why))
        if pause > 0:
            time.sleep(pause)
