"""The asyncio client: the same as Client, awaited.

    client = semd.AsyncClient()
    async with client.acquire("db-pool", n=1, timeout=30) as permit:
        await use_the_pool(permit.token)

``acquire()`` may be awaited (an AsyncPermit) or used directly with
``async with``. Cancelling a waiting acquire closes its connection, so
semd removes the waiter at once. Each permit has a task that WATCHes it
(``permit.lost``, an asyncio.Event) and, for a lease, one that
refreshes it a third of the lease after the last refresh; a bound
permit whose WATCH connection fails is re-ATTACHed by reopening its own
connection, as the synchronous keeper does.
"""

import asyncio
import functools
import time
from typing import (Any, Awaitable, Callable, Dict, Generator, List,
                    Optional, Sequence, Set, TypeVar, Union)

from . import protocol
from .aio_connection import AsyncConnection
from .client import (DEFAULT_CONNECT_TIMEOUT, DEFAULT_FAILOVER_TIMEOUT,
                     DEFAULT_IO_TIMEOUT, ClientSettings)
from .errors import (ConnectFailed, NotGranted, NotHeld, PermitLost,
                     ReplyLost, SemdError)
from .hosts import Search
from .protocol import Duration
from .request import AcquireRequest, LostReplyRetry, Parts, check_parts

T = TypeVar("T")

WATCH_RETRY = 0.5
WATCH_CONNECT = 1.0
POOL_MAX = 64


class AsyncPermit:
    """A granted permit (see semd.Permit); ``lost`` is an asyncio.Event
    and ``release()`` a coroutine; ``async with`` releases it."""

    def __init__(self, client: "AsyncClient", sem: str, n: int, token: int,
                 lease_ms: Optional[int], conn: Optional[AsyncConnection],
                 sent_at: float) -> None:
        self.client = client
        self.sem = sem
        self.n = n
        self.token = token
        self.lease_ms = lease_ms
        self.lease: Optional[float] = None if lease_ms is None \
            else lease_ms / 1000.0
        #: every semaphore of the grant and its n (see semd.Permit)
        self.parts: Dict[str, int] = {sem: n}
        self.lost = asyncio.Event()
        self.lost_reason: Optional[str] = None
        self.released = False
        self.sent_at = sent_at
        self._conn = conn
        self._tasks: List["asyncio.Task[None]"] = []
        self._keeper: Optional["asyncio.Task[None]"] = None

    def __repr__(self) -> str:
        return "<AsyncPermit %s n=%d token=%d%s>" % (
            self.sem, self.n, self.token,
            " lost (%s)" % self.lost_reason if self.lost.is_set() else "")

    @property
    def bound(self) -> bool:
        return self.lease_ms is None

    def _lose(self, reason: str) -> None:
        if self.released or self.lost.is_set():
            return
        self.lost_reason = reason
        self.lost.set()

    def raise_if_lost(self) -> None:
        if self.lost.is_set():
            raise PermitLost("the permit %s token %d was lost: %s" % (
                self.sem, self.token, self.lost_reason))

    async def check(self) -> Dict[str, str]:
        return await self.client.check(self.sem, self.token)

    async def release(self) -> None:
        """Give the permit back (once); NotHeld if semd no longer held
        it."""
        if self.released:
            return
        self.released = True
        # The refresh task stops now; the WATCH task ends by itself when
        # semd answers "released", and its connection is reused.
        if self._keeper is not None:
            self._keeper.cancel()
        await self.client._release(self)

    async def __aenter__(self) -> "AsyncPermit":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            await self.release()
        except SemdError:
            if exc_type is None:
                raise


class _Acquiring:
    """What acquire() returns: await it for the permit, or use it with
    ``async with`` to hold the permit for a block."""

    def __init__(self, coro: Awaitable[AsyncPermit]) -> None:
        self._coro = coro
        self._permit: Optional[AsyncPermit] = None

    def __await__(self) -> Generator[Any, None, AsyncPermit]:
        return self._coro.__await__()

    async def __aenter__(self) -> AsyncPermit:
        self._permit = await self._coro
        return self._permit

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        assert self._permit is not None
        await self._permit.__aexit__(exc_type, exc, tb)


class AsyncClient(ClientSettings):
    """The asyncio client; the arguments are those of semd.Client. Use it
    from one event loop."""

    def __init__(self, hosts: Union[None, str, Sequence[str]] = None,
                 name: Optional[str] = None, password: Optional[str] = None,
                 *, failover_timeout: Optional[Duration] =
                 DEFAULT_FAILOVER_TIMEOUT,
                 connect_timeout: Duration = DEFAULT_CONNECT_TIMEOUT,
                 io_timeout: Duration = DEFAULT_IO_TIMEOUT) -> None:
        ClientSettings.__init__(self, hosts, name, password,
                                failover_timeout, connect_timeout,
                                io_timeout)
        self._idle: List[AsyncConnection] = []
        self._permits: Set[AsyncPermit] = set()
        self._closed = False

    def _new_conn(self, watch: bool = False) -> AsyncConnection:
        """A connection (not yet open); a WATCH one searches for the
        owner briefly and is retried later."""
        return AsyncConnection(
            self._addresses, self._password, self.name,
            self._connect_timeout, self._io_timeout,
            None if watch else self._failover, self._attach_refused)

    def _take(self) -> AsyncConnection:
        if self._closed:
            raise SemdError("the client is closed", "CLOSED")
        return self._idle.pop() if self._idle else self._new_conn()

    def _give(self, conn: AsyncConnection) -> None:
        if conn.bound:
            return
        if not self._closed and len(self._idle) < POOL_MAX:
            self._idle.append(conn)
        else:
            conn.close()

    async def _plain(self, line: str,
                     listing: bool = False) -> protocol.Reply:
        conn = self._take()
        try:
            return await conn.call(line, 0, listing)
        finally:
            self._give(conn)

    async def _ok(self, line: str, listing: bool = False) -> protocol.Reply:
        return (await self._plain(line, listing)).ok()

    # -- permits ----------------------------------------------------------

    def acquire(self, name: str, n: int = 1,
                timeout: Optional[Duration] = None,
                lease: Optional[Duration] = None, *,
                id: Optional[str] = None) -> _Acquiring:
        """As Client.acquire; await it, or ``async with`` it."""
        return _Acquiring(self._acquire(self._request({name: n}, False,
                                                      timeout, lease, id)))

    def acquire_all(self, parts: Parts,
                    timeout: Optional[Duration] = None,
                    lease: Optional[Duration] = None, *,
                    id: Optional[str] = None) -> _Acquiring:
        """As Client.acquire_all; await it, or ``async with`` it."""
        return _Acquiring(self._acquire(self._request(
            check_parts(parts), True, timeout, lease, id)))

    async def _acquire(self, req: AcquireRequest) -> AsyncPermit:
        retry = LostReplyRetry(self._failover)
        sent_at = time.monotonic()
        while True:
            with_id = self._with_id(req)
            timeout_ms = req.timeout_left(retry.lost_at is not None)
            wait = None if timeout_ms is None else timeout_ms / 1000.0
            conn = self._take()
            try:
                reply = await conn.call(req.line(timeout_ms, with_id), wait,
                                        acquire=True)
            except (ReplyLost, ConnectFailed) as e:
                self._give(conn)
                pause = self._retry_pause(req, with_id, retry, e)
                if pause is None:
                    raise
                await asyncio.sleep(pause)
                continue
            except BaseException:
                # Cancelled while waiting: the connection is closed (semd
                # drops the waiter) and is not reused until reopened.
                self._give(conn)
                raise
            if self._id_refused(req, with_id, retry, reply):
                self._give(conn)
                continue
            break
        name, n = req.first
        lease_ms = req.lease_ms
        if reply.kind != "OK":
            self._give(conn)
            raise reply.error()
        token = protocol.parse_token(reply)
        permit = AsyncPermit(self, name, n, token, lease_ms,
                             conn if lease_ms is None else None, sent_at)
        permit.parts = dict(req.parts)
        if lease_ms is None:
            conn.bound.append(permit)
        else:
            self._give(conn)
        self._permits.add(permit)
        permit._tasks.append(asyncio.ensure_future(self._watch(permit)))
        if lease_ms is not None:
            permit._keeper = asyncio.ensure_future(self._keep(permit))
            permit._tasks.append(permit._keeper)
        return permit

    async def try_acquire(self, name: str, n: int = 1,
                          lease: Optional[Duration] = None, *,
                          id: Optional[str] = None) -> \
            Optional[AsyncPermit]:
        try:
            return await self.acquire(name, n, 0, lease, id=id)
        except NotGranted:
            return None

    def limited(self, name: str, n: int = 1,
                timeout: Optional[Duration] = None,
                lease: Optional[Duration] = None,
                permit_arg: Optional[str] = None) -> \
            Callable[[Callable[..., Awaitable[T]]],
                     Callable[..., Awaitable[T]]]:
        """As Client.limited, for coroutine functions."""
        def decorate(fn: Callable[..., Awaitable[T]]) -> \
                Callable[..., Awaitable[T]]:
            @functools.wraps(fn)
            async def wrapper(*args: Any, **kwargs: Any) -> T:
                async with self.acquire(name, n, timeout, lease) as permit:
                    if permit_arg is not None:
                        kwargs[permit_arg] = permit
                    return await fn(*args, **kwargs)
            return wrapper
        return decorate

    async def _release(self, permit: AsyncPermit) -> None:
        self._permits.discard(permit)
        line = protocol.token_line("RELEASE", permit.sem, permit.token)
        conn = permit._conn
        if conn is None:
            reply = await self._plain(line)
        else:
            try:
                try:
                    reply = await conn.call(line)
                except ReplyLost:
                    return      # closed: semd releases its bound permits
            finally:
                if permit in conn.bound:
                    conn.bound.remove(permit)
                permit._conn = None
                self._give(conn)
        if reply.kind != "OK":
            err = reply.error()
            if isinstance(err, NotHeld):
                permit.lost_reason = permit.lost_reason or "notheld"
                permit.lost.set()
            raise err

    def _attach_refused(self, permit: Any, err: SemdError) -> None:
        permit._lose("unclaimed" if isinstance(err, NotHeld) else
                     "attach refused: %s" % err)

    # -- keeping and watching -------------------------------------------

    async def _watch(self, p: AsyncPermit) -> None:
        """WATCH p until it ends; re-attach a bound permit whose
        connection failed; retry a lease's WATCH (its refreshes keep it)."""
        while not p.released and not p.lost.is_set():
            conn = self._take() if self._idle else \
                self._new_conn(watch=True)
            ok = False
            try:
                if conn.broken():
                    await conn.open(Search(conn.addresses, WATCH_CONNECT))
                await conn.send_line(protocol.token_line("WATCH", p.sem,
                                                         p.token))
                reply = await conn.read_reply(None)
                ok = True
            except SemdError:
                pass
            except Exception:
                conn.close()        # _IOFailed from send_line
            finally:
                if conn.broken():
                    conn.close()
                self._give(conn)
            if ok:
                if reply.kind == "OK":
                    p._lose(reply.words[0] if reply.words else "ended")
                    return
                if reply.code == "NOTHELD":
                    p._lose("notheld")
                    return
                if reply.code not in ("STANDBY", "UNAVAILABLE"):
                    return          # a semd without WATCH
            if p.released or p.lost.is_set():
                return
            if p.bound and p._conn is not None:
                if not await self._reattach(p._conn):
                    return
            else:
                await asyncio.sleep(WATCH_RETRY)

    async def _reattach(self, conn: AsyncConnection) -> bool:
        """Reopen a bound permit's connection if semd closed it (which
        ATTACHes its permits again); False when it cannot."""
        async with conn.lock:
            if not conn.bound:
                return True
            # The FIN of a killed semd may not have reached this
            # connection yet: a PING tells (harmless if sent twice).
            try:
                dead = conn.broken() or \
                    (await conn.call_unlocked("PING")).kind != "OK"
            except SemdError:
                dead = True
            if dead:
                try:
                    await conn.open(Search(conn.addresses, self._failover,
                                           always=True))
                except SemdError:
                    conn.close()
                    for q in list(conn.bound):
                        q._lose("unreachable")
                    return False
        if not dead:
            await asyncio.sleep(WATCH_RETRY)    # the WATCH failed alone
        return True

    async def _keep(self, p: AsyncPermit) -> None:
        """REFRESH p's lease a third of the lease after the last one."""
        assert p.lease_ms is not None
        lease = p.lease_ms / 1000.0
        end = p.sent_at + lease
        next_at = p.sent_at + lease / 3
        conn = self._new_conn()
        try:
            while not p.released and not p.lost.is_set():
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                if p.released:
                    return
                sent = time.monotonic()
                conn.failover_timeout = max(0.1, end - sent)
                try:
                    reply = await conn.call(protocol.token_line(
                        "REFRESH", p.sem, p.token, str(p.lease_ms)))
                    err = None if reply.kind == "OK" else reply.error()
                except SemdError as e:
                    err = e
                if err is None:
                    end, next_at = sent + lease, sent + lease / 3
                elif isinstance(err, NotHeld):
                    p._lose("expired")
                elif time.monotonic() >= end:
                    p._lose("unreachable")
                else:
                    next_at = time.monotonic() + min(lease / 3,
                                                     WATCH_RETRY)
        finally:
            conn.close()

    # -- the other commands -----------------------------------------------

    async def ping(self) -> None:
        await self._ok("PING")

    async def create(self, name: str, capacity: int) -> None:
        protocol.check_count(capacity, "capacity")
        await self._ok("CREATE %s %d" % (protocol.check_name(name),
                                         capacity))

    async def resize(self, name: str, capacity: int) -> None:
        protocol.check_count(capacity, "capacity", 0)
        await self._ok("RESIZE %s %d" % (protocol.check_name(name),
                                         capacity))

    async def delete(self, name: str) -> None:
        await self._ok("DELETE %s" % protocol.check_name(name))

    async def info(self, name: str) -> Dict[str, str]:
        return (await self._ok("INFO %s" % protocol.check_name(name))).kv()

    async def holders(self, name: str) -> List[Dict[str, str]]:
        return (await self._ok("HOLDERS %s" % protocol.check_name(name),
                               True)).lines

    async def waiters(self, name: str) -> List[Dict[str, str]]:
        return (await self._ok("WAITERS %s" % protocol.check_name(name),
                               True)).lines

    async def check(self, name: str, token: int) -> Dict[str, str]:
        return (await self._ok(protocol.token_line("CHECK", name,
                                                   token))).kv()

    async def revoke(self, name: str, token: int) -> None:
        await self._ok(protocol.token_line("REVOKE", name, token))

    async def role(self) -> Dict[str, str]:
        return (await self._ok("ROLE")).kv()

    async def close(self) -> None:
        """Close every connection and stop the permits' tasks."""
        self._closed = True
        tasks = []
        for p in list(self._permits):
            p._lose("client closed")
            for t in p._tasks:
                t.cancel()
                tasks.append(t)
            if p._conn is not None:
                p._conn.close()
        self._permits.clear()
        await asyncio.gather(*tasks, return_exceptions=True)
        for conn in self._idle:
            conn.close()
        self._idle.clear()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
