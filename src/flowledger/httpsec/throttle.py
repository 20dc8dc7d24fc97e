"""A bound on failed authentications per client.

After `FailureBound.failures` failed authentications (a bearer token or a sign-in token
that serves no session) from one client within `FailureBound.window` seconds, every
further attempt of that client is refused (429 with ``Retry-After``) *before* its token
is compared, until the oldest of those failures is older than the window; then one more
attempt is allowed, and so on: at most ``failures`` guesses per window and client.

* A success does not clear a client's failures: otherwise a tenant holding one valid
  token could interleave it with guesses at other tenants' tokens without bound.
* A client is its address as the ASGI server reports it (`client_key`): an IPv4
  address, or an IPv6 address's /64 network (one host commonly holds a whole /64).
  uvicorn takes it from ``X-Forwarded-For`` only when the connection comes from an
  address in ``FORWARDED_ALLOW_IPS`` (default: loopback), so clients behind a reverse
  proxy on this machine are told apart, and a remote client cannot choose its address.
  Everyone behind one proxy elsewhere (or one NAT) is one client.
* Memory is bounded: at most `FailureBound.clients` clients are remembered, each with
  at most ``failures`` timestamps; when a new client fails, the client that failed
  least recently is forgotten.

Requests that present no token are not attempts (there is nothing to compare), and the
dashboard's sign-in cookies are not tokens (random 256-bit values; a stale one only
sends the browser to the sign-in page).
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.types import Scope

__all__ = [
    "DEFAULT_BOUND",
    "FailureBound",
    "FailureLimiter",
    "TooManyFailuresError",
    "client_key",
]


@dataclass(frozen=True)
class FailureBound:
    """How many failed authentications a client may make, and how long they count.

    ``failures`` per ``window`` seconds and client; ``clients`` clients remembered at
    most; ``clock`` is where time comes from (seconds, monotonic; tests pass their own).
    """

    failures: int = 10
    window: float = 60.0
    clients: int = 4096
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)

    def __post_init__(self) -> None:
        for name in ("failures", "clients"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"FailureBound.{name} must be an integer >= 1, not {value!r}")
        window = self.window
        if isinstance(window, bool) or not isinstance(window, int | float):
            raise ValueError(f"FailureBound.window must be a number of seconds, not {window!r}")
        if not math.isfinite(window) or window <= 0:
            raise ValueError(f"FailureBound.window must be > 0 seconds, not {window!r}")


#: 10 failed authentications a minute per client, 4096 clients remembered.
DEFAULT_BOUND = FailureBound()


class TooManyFailuresError(Exception):
    """The client failed too often: it may try again in `retry_after` seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            f"too many failed authentications from this address; try again in {retry_after} s"
        )
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        """The ``Retry-After`` header of the 429 answer."""
        return {"Retry-After": str(self.retry_after)}


def client_key(scope: Scope) -> str:
    """The client a request counts against (see the module doc); ``""`` when the ASGI
    server reports no address."""
    client = scope.get("client")
    host = str(client[0]) if client else ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host  # not an IP address (a Unix socket, a test client's name)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class FailureLimiter:
    """The failures of recent clients (an LRU of at most ``bound.clients`` clients)."""

    def __init__(self, bound: FailureBound = DEFAULT_BOUND) -> None:
        self.bound = bound
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def __len__(self) -> int:
        """How many clients are remembered."""
        return len(self._failures)

    def _expire(self, times: deque[float], now: float) -> None:
        while times and times[0] <= now - self.bound.window:
            times.popleft()

    def retry_after(self, client: str) -> int | None:
        """Whole seconds until ``client`` may try again (>= 1), or ``None`` if it may
        try now."""
        times = self._failures.get(client)
        if times is None:
            return None
        now = self.bound.clock()
        self._expire(times, now)
        if not times:
            del self._failures[client]
            return None
        if len(times) < self.bound.failures:
            return None
        return max(1, math.ceil(times[0] + self.bound.window - now))

    def failed(self, client: str) -> None:
        """Count a failed authentication of ``client``."""
        now = self.bound.clock()
        times = self._failures.get(client)
        if times is None:
            times = deque(maxlen=self.bound.failures)
            self._failures[client] = times
            while len(self._failures) > self.bound.clients:
                self._failures.popitem(last=False)
        else:
            self._failures.move_to_end(client)
            self._expire(times, now)
        times.append(now)
