"""semd: a client for the semd semaphore coordinator daemon.

    import semd
    client = semd.Client()                   # SEMD_HOSTS, else 127.0.0.1:7313
    with client.acquire("db-pool", n=1, timeout=30) as permit:
        use_the_pool(permit.token)           # a fencing token

``semd.AsyncClient`` is the same for asyncio. Durations are seconds
(int, float) or timedelta. Standard library only.
"""

from .aio import AsyncClient, AsyncPermit
from .client import Client
from .errors import (AcquireLost, AlreadyExists, AuthError, Busy,
                     ConnectFailed, LimitReached, NoSuchConnection,
                     NoSuchSemaphore, NotGranted, NotHeld, NotLease,
                     NotOwner, PermitLost, ProtocolError, ReplyLost,
                     SemdError, Standby, TooLarge, Unavailable)
from .permit import Permit

__version__ = "0.1.0"       # semd's (configure.ac); speaks protocol 1.1

__all__ = [
    "Client", "Permit", "AsyncClient", "AsyncPermit",
    "SemdError", "NotGranted", "NoSuchSemaphore", "PermitLost", "NotHeld",
    "AcquireLost", "Unavailable", "ConnectFailed", "Standby", "ReplyLost",
    "ProtocolError", "AuthError", "AlreadyExists", "TooLarge", "NotOwner",
    "NotLease", "Busy", "LimitReached", "NoSuchConnection",
]
