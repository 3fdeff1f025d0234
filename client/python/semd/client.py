"""The synchronous client.

    client = semd.Client()                   # SEMD_HOSTS, else 127.0.0.1:7313
    with client.acquire("db-pool", n=1, timeout=30) as permit:
        use_the_pool(permit.token)

Thread-safe: each call takes a connection of its own from a small pool
(one lock per connection), so a waiting acquire never holds up another
thread. A permit without a lease is bound to the connection that
acquired it, which stays with the permit until it is released: if the
process dies, semd releases the permit. A background keeper thread
refreshes leases and WATCHes every permit (keeper.py).
"""

import functools
import threading
import time
from typing import (Any, Callable, Dict, List, Optional, Sequence, Set,
                    TypeVar, Union)

from . import protocol
from .connection import Connection
from .errors import (AcquireLost, ConnectFailed, NotGranted, NotHeld,
                     ReplyLost, SemdError)
from .hosts import Addresses, Search
from .keeper import Keeper
from .permit import Permit
from .protocol import Duration
from .request import AcquireRequest, LostReplyRetry, Parts, check_parts

T = TypeVar("T")

DEFAULT_FAILOVER_TIMEOUT = 15.0
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_IO_TIMEOUT = 10.0
POOL_MAX = 64           # idle connections kept for reuse



class ClientSettings:
    """The arguments of Client and AsyncClient, checked and in seconds."""

    def __init__(self, hosts: Union[None, str, Sequence[str]],
                 name: Optional[str], password: Optional[str],
                 failover_timeout: Optional[Duration],
                 connect_timeout: Duration, io_timeout: Duration) -> None:
        self._addresses = Addresses(hosts)
        self.name = None if name is None else protocol.check_label(name)
        self._password = password
        self._failover = None if failover_timeout is None else \
            protocol.to_ms(failover_timeout, "failover_timeout") / 1000.0
        self._connect_timeout = protocol.to_ms(
            connect_timeout, "connect_timeout", 1) / 1000.0
        self._io_timeout = protocol.to_ms(io_timeout, "io_timeout",
                                          1) / 1000.0
        self._ids_refused = False   # a semd before 1.1 refused ID

    def _request(self, parts: Dict[str, int], multi: bool,
                 timeout: Optional[Duration], lease: Optional[Duration],
                 request_id: Optional[str]) -> AcquireRequest:
        """An acquire checked, its durations in ms, its id settled."""
        for name, n in parts.items():
            protocol.check_name(name)
            protocol.check_count(n)
        timeout_ms = None if timeout is None else \
            protocol.to_ms(timeout, "timeout")
        lease_ms = None if lease is None else \
            protocol.to_ms(lease, "lease", 1)
        return AcquireRequest(parts, multi, timeout_ms, lease_ms, request_id)

    def _with_id(self, req: AcquireRequest) -> bool:
        """Send the id? Not a drawn one to a semd that refused ids."""
        return req.id is not None and not (req.drawn and self._ids_refused)

    def _id_refused(self, req: AcquireRequest, with_id: bool,
                    retry: LostReplyRetry, reply: protocol.Reply) -> bool:
        """A semd before 1.1 answers ERR PROTO to ID: a drawn id goes
        (for every later acquire too) and the request is sent again."""
        if reply.kind == "ERR" and reply.code == "PROTO" and with_id and \
                req.drawn and not req.multi and retry.lost_at is None:
            self._ids_refused = True
            return True
        return False

    def _retry_pause(self, req: AcquireRequest, with_id: bool,
                     retry: LostReplyRetry, err: SemdError) -> \
            Optional[float]:
        """A leased acquire whose reply was lost (or, after that, could
        not be sent again) is sent again with its id: the pause first.
        None: not to be retried (the caller raises err); AcquireLost once
        failover_timeout has passed since the loss."""
        lost = isinstance(err, ReplyLost) or \
            (retry.lost_at is not None and isinstance(err, ConnectFailed))
        if not (lost and with_id) or req.id is None:
            return None
        pause = retry.next_pause()
        if pause is None:
            raise AcquireLost("%s; last: %s" % (retry.give_up_text(req.id),
                                                err)) from err
        return pause

class Client(ClientSettings):
    """A client of semd (or of an owner and its standbys).

    hosts: a list of ``"host:port"`` or one comma-separated string; None
    reads ``SEMD_HOSTS``, else ``127.0.0.1:7313``. name: a label semd
    shows in ``HOLDERS`` and ``CLIENTS`` (sent as ``NAME``). password:
    sent as ``AUTH`` on every connection. failover_timeout: how long a
    call searches for the owner (a standby's ``owner=``, then each
    address in turn, pausing 100 ms doubling to 1 s); None for one pass.
    All durations are seconds (int or float) or timedelta.
    """

    def __init__(self, hosts: Union[None, str, Sequence[str]] = None,
                 name: Optional[str] = None, password: Optional[str] = None,
                 *, failover_timeout: Optional[Duration] =
                 DEFAULT_FAILOVER_TIMEOUT,
                 connect_timeout: Duration = DEFAULT_CONNECT_TIMEOUT,
                 io_timeout: Duration = DEFAULT_IO_TIMEOUT) -> None:
        ClientSettings.__init__(self, hosts, name, password,
                                failover_timeout, connect_timeout,
                                io_timeout)
        self._lock = threading.Lock()
        self._idle: List[Connection] = []
        self._keeper: Optional[Keeper] = None
        self._reattaching: Set[int] = set()
        self._bound: Set[Permit] = set()    # held, bound to a connection
        self._closed = False

    # -- connections ------------------------------------------------------

    def _new_conn(self, keeper: bool = False) -> Connection:
        """A connection (not yet open). The keeper's own ones hold no
        bound permits and search for the owner briefly, retrying later."""
        if keeper:
            return Connection(self._addresses, self._password, self.name,
                              self._connect_timeout, self._io_timeout,
                              None, None)
        return Connection(self._addresses, self._password, self.name,
                          self._connect_timeout, self._io_timeout,
                          self._failover, self._attach_refused)

    def _take(self) -> Connection:
        with self._lock:
            if self._closed:
                raise SemdError("the client is closed", "CLOSED")
            if self._idle:
                return self._idle.pop()
        return self._new_conn()

    def _give(self, conn: Connection) -> None:
        with self._lock:
            if not self._closed and not conn.bound and \
                    len(self._idle) < POOL_MAX:
                self._idle.append(conn)
                return
        if not conn.bound:
            conn.close()

    def _plain(self, line: str, listing: bool = False) -> protocol.Reply:
        """One request on a pooled connection; the reply as it is."""
        conn = self._take()
        try:
            return conn.call(line, 0, listing)
        finally:
            self._give(conn)

    def _ok(self, line: str, listing: bool = False) -> protocol.Reply:
        return self._plain(line, listing).ok()

    def _keeper_for(self) -> Keeper:
        with self._lock:
            if self._keeper is None:
                self._keeper = Keeper(self)
            return self._keeper

    # -- permits ----------------------------------------------------------

    def acquire(self, name: str, n: int = 1,
                timeout: Optional[Duration] = None,
                lease: Optional[Duration] = None, *,
                id: Optional[str] = None) -> Permit:
        """Wait for n permits of semaphore name, in FIFO order; timeout
        None waits for ever, 0 does not wait. Without lease the permit is
        bound to its connection (released by semd if this process dies);
        with lease it outlives the connection and is refreshed in the
        background while held. A leased acquire carries a request id (id,
        else 128 random bits): a repeat with the same id while the lease
        is held answers its token and grants nothing, and a reply lost
        on the way is asked again with it on a new connection (for
        failover_timeout), so the lease is not leaked. Raises NotGranted
        when the wait ends, NoSuchSemaphore, TooLarge (n over the
        capacity), AlreadyExists (the id held with another n),
        Unavailable, AcquireLost (a permit may have been granted and
        lost)."""
        return self._acquire(self._request({name: n}, False, timeout,
                                           lease, id))

    def acquire_all(self, parts: Parts,
                    timeout: Optional[Duration] = None,
                    lease: Optional[Duration] = None, *,
                    id: Optional[str] = None) -> Permit:
        """``ACQUIREALL``: n of each of 2 to 16 semaphores ({name: n} or
        (name, n) pairs), all or none, as one grant under one token.
        Waits in every queue at once: two callers naming them in
        opposite orders never deadlock. timeout, lease and id as in
        acquire; permit.parts lists them; release() frees all."""
        return self._acquire(self._request(check_parts(parts), True,
                                           timeout, lease, id))

    def _acquire(self, req: AcquireRequest) -> Permit:
        """Send req (again after a lost reply) and hold its permit."""
        retry = LostReplyRetry(self._failover)
        sent_at = time.monotonic()
        while True:
            with_id = self._with_id(req)
            timeout_ms = req.timeout_left(retry.lost_at is not None)
            wait = None if timeout_ms is None else timeout_ms / 1000.0
            conn = self._take()
            try:
                reply = conn.call(req.line(timeout_ms, with_id), wait,
                                  acquire=True)
            except (ReplyLost, ConnectFailed) as e:
                self._give(conn)
                pause = self._retry_pause(req, with_id, retry, e)
                if pause is None:
                    raise
                time.sleep(pause)
                continue
            except BaseException:
                self._give(conn)
                raise
            if self._id_refused(req, with_id, retry, reply):
                self._give(conn)
                continue
            break
        if reply.kind != "OK":
            self._give(conn)
            raise reply.error()
        token = protocol.parse_token(reply)
        name, n = req.first
        lease_ms = req.lease_ms
        if lease_ms is None:
            permit = Permit(self, name, n, token, None, conn, sent_at)
            conn.bound.append(permit)
            with self._lock:
                self._bound.add(permit)
        else:
            permit = Permit(self, name, n, token, lease_ms, None, sent_at)
            self._give(conn)
        permit.parts = dict(req.parts)
        self._keeper_for().add(permit)
        return permit

    def try_acquire(self, name: str, n: int = 1,
                    lease: Optional[Duration] = None, *,
                    id: Optional[str] = None) -> Optional[Permit]:
        """``TRY``: a Permit if n are free now (and nobody waits), else
        None."""
        try:
            return self.acquire(name, n, 0, lease, id=id)
        except NotGranted:
            return None

    def limited(self, name: str, n: int = 1,
                timeout: Optional[Duration] = None,
                lease: Optional[Duration] = None,
                permit_arg: Optional[str] = None) -> \
            Callable[[Callable[..., T]], Callable[..., T]]:
        """A decorator: each call of the function runs holding n permits
        of name (released when it returns or raises). permit_arg names a
        keyword argument that receives the Permit (for its fencing
        token); the decorated function is called without it::

            @client.limited("api", n=1, permit_arg="permit")
            def call_api(url, permit):
                return fetch(url, headers={"X-Fencing-Token":
                                           str(permit.token)})
        """
        def decorate(fn: Callable[..., T]) -> Callable[..., T]:
            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> T:
                with self.acquire(name, n, timeout, lease) as permit:
                    if permit_arg is not None:
                        kwargs[permit_arg] = permit
                    return fn(*args, **kwargs)
            return wrapper
        return decorate

    def _release(self, permit: Permit) -> None:
        """RELEASE, on the permit's own connection if it is bound."""
        line = protocol.token_line("RELEASE", permit.sem, permit.token)
        with self._lock:
            self._bound.discard(permit)
        conn = permit._conn
        if conn is None:
            reply = self._plain(line)
        else:
            try:
                with conn.lock:
                    try:
                        reply = conn.call(line)
                    except ReplyLost:
                        # The connection is closed: semd releases a
                        # permit bound to it (after reclaim-grace, if it
                        # restarted meanwhile).
                        return
                    finally:
                        if permit in conn.bound:
                            conn.bound.remove(permit)
            finally:
                permit._conn = None
                self._give(conn)
        if reply.kind != "OK":
            err = reply.error()
            if isinstance(err, NotHeld):
                with permit._lock:
                    if permit.lost_reason is None:
                        permit.lost_reason = "notheld"
                permit.lost.set()
            raise err

    def _attach_refused(self, permit: Any, err: SemdError) -> None:
        """A reconnected connection could not ATTACH permit again."""
        permit._lose("unclaimed" if isinstance(err, NotHeld) else
                     "attach refused: %s" % err)

    def _reattach_later(self, permit: Permit) -> None:
        """The keeper saw permit's WATCH connection fail: in a thread of
        its own, reopen the permit's connection (which ATTACHes its
        permits again) and hand the permits back to the keeper."""
        conn = permit._conn
        if conn is None:
            return
        with self._lock:
            if id(conn) in self._reattaching:
                return
            self._reattaching.add(id(conn))
        threading.Thread(target=self._reattach, args=(conn,), daemon=True,
                         name="semd-reattach").start()

    def _reattach(self, conn: Connection) -> None:
        try:
            with conn.lock:
                if not conn.bound:
                    return
                # The FIN of a killed semd may not have reached this
                # connection yet: a PING tells (harmless if sent twice).
                try:
                    reopened = conn.broken() or \
                        conn.call("PING").kind != "OK"
                except SemdError:
                    reopened = True
                if reopened:
                    try:
                        conn.open(Search(conn.addresses, self._failover,
                                         always=True))
                    except SemdError:
                        conn.close()
                        for p in list(conn.bound):
                            p._lose("unreachable")
                        return
                keeper = self._keeper_for()
                for p in list(conn.bound):
                    keeper.add(p, 0.0 if reopened else 0.5)
        finally:
            with self._lock:
                self._reattaching.discard(id(conn))

    # -- the other commands -----------------------------------------------

    def ping(self) -> None:
        self._ok("PING")

    def create(self, name: str, capacity: int) -> None:
        """``CREATE``: OK also when it exists with that capacity."""
        protocol.check_count(capacity, "capacity")
        self._ok("CREATE %s %d" % (protocol.check_name(name), capacity))

    def resize(self, name: str, capacity: int) -> None:
        protocol.check_count(capacity, "capacity", 0)
        self._ok("RESIZE %s %d" % (protocol.check_name(name), capacity))

    def delete(self, name: str) -> None:
        self._ok("DELETE %s" % protocol.check_name(name))

    def info(self, name: str) -> Dict[str, str]:
        """``INFO``: capacity, used, available, holders, waiters..."""
        return self._ok("INFO %s" % protocol.check_name(name)).kv()

    def holders(self, name: str) -> List[Dict[str, str]]:
        return self._ok("HOLDERS %s" % protocol.check_name(name),
                        True).lines

    def waiters(self, name: str) -> List[Dict[str, str]]:
        return self._ok("WAITERS %s" % protocol.check_name(name),
                        True).lines

    def check(self, name: str, token: int) -> Dict[str, str]:
        """``CHECK``: what a guarded resource asks before acting on a
        token; NotHeld when it is not held."""
        return self._ok(protocol.token_line("CHECK", name, token)).kv()

    def revoke(self, name: str, token: int) -> None:
        """``REVOKE`` (an operator's tool): frees any grant."""
        self._ok(protocol.token_line("REVOKE", name, token))

    def role(self) -> Dict[str, str]:
        """``ROLE``: role (owner, standby, single), epoch, owner."""
        return self._ok("ROLE").kv()

    # -- the end ----------------------------------------------------------

    def close(self) -> None:
        """Close every connection: semd releases the bound permits still
        held; leases run out unless released."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            keeper, self._keeper = self._keeper, None
            bound, self._bound = self._bound, set()
        if keeper is not None:
            keeper.stop()
        for conn in idle:
            conn.close()
        for p in bound:
            p._lose("client closed")
            if p._conn is not None:
                p._conn.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
