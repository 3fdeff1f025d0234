#!/usr/bin/env python3
"""Guard a rate-limited HTTP API with semd.

At most the capacity of the semaphore (``semd-cli create api 2``) calls
are in flight at once, across every process and host that uses the same
semd. Each call carries its permit's fencing token in the
``X-Fencing-Token`` header, so the API can refuse a holder that was
paused past the end of its permit (it keeps the highest token it has
accepted, or asks semd's ``CHECK``).

    SEMD_HOSTS=127.0.0.1:7313 python3 rate_limited_http.py URL [--calls N]

Each call prints one line, what it held and when (monotonic clock, the
same for every process on the host), so a run of many processes can be
checked never to have held more than the capacity together:

    held api token=17 from=1234.500123 to=1234.520456 status=200
"""

import argparse
import os
import socket
import sys
import time
import urllib.request

import semd


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url", help="the rate-limited API to call")
    ap.add_argument("--sem", default="api", help="semaphore (api)")
    ap.add_argument("--calls", type=int, default=1, help="calls to make")
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="seconds to wait for a permit (30)")
    args = ap.parse_args()

    # SEMD_HOSTS names semd (or an owner and its standbys); the name is
    # what `semd-cli holders api` shows for this process.
    client = semd.Client(name="ratelimited@%s:%d" % (
        socket.gethostname()[:40], os.getpid()))

    @client.limited(args.sem, n=1, timeout=args.timeout,
                    permit_arg="permit")
    def call_api(url: str, permit: semd.Permit) -> int:
        request = urllib.request.Request(
            url, headers={"X-Fencing-Token": str(permit.token)})
        start = time.monotonic()
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            status = int(response.status)
        end = time.monotonic()
        # A permit lost meanwhile (revoked, expired) means the call may
        # have overlapped another holder's: say so, do not hide it.
        permit.raise_if_lost()
        print("held %s token=%d from=%.6f to=%.6f status=%d" % (
            args.sem, permit.token, start, end, status), flush=True)
        return status

    try:
        for _ in range(args.calls):
            call_api(args.url)
    except semd.NotGranted:
        print("not granted within %g s" % args.timeout, file=sys.stderr)
        return 75
    except semd.SemdError as e:
        print("semd: %s" % e, file=sys.stderr)
        return 3
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
