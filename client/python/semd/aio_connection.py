"""One asyncio connection to the owner semd: the asyncio twin of
connection.py, with the same rules (AUTH, NAME, ATTACH again on reopen;
a request not sent, or refused by a standby, is sent again to the
owner; a lost reply is never sent again). A call cancelled while it
waits (a waiting ACQUIRE) closes the connection, so semd drops the
waiter at once and no late reply is read for another request.
"""

import asyncio
import socket
from typing import Any, Callable, List, Optional

from . import protocol
from .errors import (ConnectFailed, ProtocolError, ReplyLost,
                     SemdError, Standby)
from .connection import ConnectionSettings, LostFn, reply_lost
from .hosts import Addresses, Search, format_address

MAX_REPLY_LINE = 1 << 20


class _IOFailed(Exception):
    pass


class AsyncConnection(ConnectionSettings):
    """See connection.Connection; ``lock`` is an asyncio.Lock."""

    def __init__(self, addresses: Addresses, password: Optional[str],
                 name: Optional[str], connect_timeout: float,
                 io_timeout: float, failover_timeout: Optional[float],
                 on_lost: Optional[LostFn] = None) -> None:
        super().__init__(addresses, password, name, connect_timeout,
                         io_timeout, failover_timeout, on_lost)
        self.lock = asyncio.Lock()
        self.reader: Optional[asyncio.StreamReader] = None
        self.writer: Optional[asyncio.StreamWriter] = None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    def broken(self) -> bool:
        return self.writer is None or self.reader is None or \
            self.writer.is_closing() or self.reader.at_eof()

    async def _connect_once(self) -> None:
        host, port = self.addresses.current()
        try:
            self.reader, self.writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=MAX_REPLY_LINE),
                self.connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            self.close()
            raise ConnectFailed("cannot connect to %s: %s" % (
                format_address((host, port)),
                getattr(e, "strerror", None) or e or "timed out")) from None
        s = self.writer.get_extra_info("socket") \
            if self.writer is not None else None
        if s is not None:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)

    async def send_line(self, line: str) -> None:
        if self.writer is None:
            raise _IOFailed("not connected")
        try:
            self.writer.write(line.encode() + b"\n")
            await asyncio.wait_for(self.writer.drain(), self.io_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            self.close()
            raise _IOFailed(str(e) or "timed out") from None

    async def read_line(self, wait: Optional[float]) -> str:
        if self.reader is None:
            raise _IOFailed("not connected")
        bound = None if wait is None else self.io_timeout + wait
        try:
            data = await asyncio.wait_for(self.reader.readline(), bound)
        except BaseException as e:
            # Cancelled or failed mid-read: the reply may come later.
            self.close()
            if isinstance(e, (OSError, ValueError, asyncio.TimeoutError,
                              asyncio.LimitOverrunError,
                              asyncio.IncompleteReadError)):
                raise _IOFailed(str(e) or "timed out") from None
            raise
        if not data.endswith(b"\n"):
            self.close()
            raise _IOFailed("semd closed the connection")
        return data.rstrip(b"\r\n").decode("utf-8", "replace")

    async def read_reply(self, wait: Optional[float], listing: bool = False,
                         acquire: bool = False) -> protocol.Reply:
        try:
            reply = protocol.parse_reply(await self.read_line(wait))
            if listing and reply.kind == "OK":
                k = protocol.listing_count(reply)
                reply.lines = [protocol.parse_kv(
                    (await self.read_line(0)).split()) for _ in range(k)]
        except _IOFailed as e:
            raise reply_lost(e, acquire) from None
        except ProtocolError:
            self.close()
            raise
        return self.after_reply(reply)

    async def _handshake(self, line: str) -> protocol.Reply:
        try:
            await self.send_line(line)
            return await self.read_reply(0)
        except (_IOFailed, ReplyLost, ProtocolError) as e:
            self.close()
            raise ConnectFailed("connected, then failed during %s: %s"
                                % (line.split()[0], e)) from None

    async def _open_once(self) -> None:
        self.close()
        await self._connect_once()
        if self.password is not None:
            r = await self._handshake("AUTH " + self.password)
            if r.kind != "OK":
                self.close()
                raise r.error()
        if self.name is not None:
            r = await self._handshake("NAME " + self.name)
            if r.kind == "ERR" and r.code == "STANDBY":
                self.close()
                raise r.error()
        if self.ever_connected and self.bound:
            for permit in list(self.bound):
                r = await self._handshake(protocol.token_line(
                    "ATTACH", permit.sem, permit.token))
                if r.kind == "OK":
                    continue
                if r.code == "STANDBY":
                    self.close()
                    raise r.error()
                self.bound.remove(permit)
                if self.on_lost is not None:
                    self.on_lost(permit, r.error())
        self.ever_connected = True

    async def open(self, search: Optional[Search] = None) -> None:
        if search is None:
            search = Search(self.addresses, self.failover_timeout)
        while True:
            try:
                await self._open_once()
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
                    await asyncio.sleep(pause)

    async def call(self, line: str, wait: Optional[float] = 0,
                   listing: bool = False,
                   acquire: bool = False) -> protocol.Reply:
        async with self.lock:
            return await self.call_unlocked(line, wait, listing, acquire)

    async def call_unlocked(self, line: str, wait: Optional[float] = 0,
                            listing: bool = False,
                            acquire: bool = False) -> protocol.Reply:
        """call(), with self.lock already held (asyncio.Lock is not
        reentrant)."""
        search = Search(self.addresses, self.failover_timeout)
        reopened = False
        if self.broken():
            await self.open(search)
            reopened = True
        while True:
            try:
                await self.send_line(line)
            except _IOFailed as e:
                if reopened and not self.addresses.many():
                    raise ConnectFailed("cannot send: %s" % e) \
                        from None
                await self._next_or_raise(search, None, e)
                await self.open(search)
                reopened = True
                continue
            reply = await self.read_reply(wait, listing, acquire)
            if reply.kind == "ERR" and reply.code == "STANDBY":
                self.close()
                await self._next_or_raise(search, self.addresses.hint,
                                          reply.error())
                await self.open(search)
                reopened = True
                continue
            return reply

    async def _next_or_raise(self, search: Search, owner: Optional[int],
                             why: Exception) -> None:
        pause = search.next(owner)
        if pause is None:
            if isinstance(why, SemdError):
                raise why
            raise ConnectFailed("%s; last: %s" % (search.give_up_text(),
                                                  why))
        if pause > 0:
            await asyncio.sleep(pause)
