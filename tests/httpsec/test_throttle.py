"""`flowledger.httpsec.throttle`: the bound on failed authentications per client, with a
clock of the test's own (no test waits for time to pass)."""

from __future__ import annotations

import pytest

from flowledger.httpsec import (
    Authenticator,
    FailureBound,
    FailureLimiter,
    TooManyFailuresError,
    client_key,
)
from flowledger.httpsec.throttle import DEFAULT_BOUND

TOKEN = "token-a-0123456789abcdef"
SESSION = "7c9e6679-7425-40de-944b-e07fc1f90ae7"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_default_bound_is_ten_a_minute() -> None:
    assert (DEFAULT_BOUND.failures, DEFAULT_BOUND.window, DEFAULT_BOUND.clients) == (10, 60.0, 4096)


def test_after_n_failures_a_client_waits_for_the_oldest_to_age_out() -> None:
    clock = Clock()
    limiter = FailureLimiter(FailureBound(failures=3, window=60, clock=clock))
    for _ in range(3):
        assert limiter.retry_after("a") is None
        limiter.failed("a")
        clock.now += 10
    # failures at 1000, 1010, 1020; now 1030: the oldest counts until 1060
    assert limiter.retry_after("a") == 30
    assert limiter.retry_after("b") is None
    clock.now = 1059.5
    assert limiter.retry_after("a") == 1  # whole seconds, rounded up
    clock.now = 1060.0
    assert limiter.retry_after("a") is None  # one more attempt...
    limiter.failed("a")
    assert limiter.retry_after("a") == 10  # ...until 1010's failure ages out at 1070
    clock.now = 1200.0
    assert limiter.retry_after("a") is None
    assert len(limiter) == 0  # a client whose failures all aged out is forgotten


def test_the_authenticator_refuses_without_comparing_and_success_does_not_reset() -> None:
    clock = Clock()
    auth = Authenticator({TOKEN: SESSION}, FailureBound(failures=2, window=60, clock=clock))
    assert auth.authenticate("wrong-token-0123456789ab", "a") is None
    assert auth.authenticate(TOKEN, "a") == SESSION  # a success...
    assert auth.authenticate("wrong-token-0123456789ab", "a") is None  # ...cleared nothing
    with pytest.raises(TooManyFailuresError) as caught:
        auth.authenticate(TOKEN, "a")  # even the right token waits
    assert caught.value.retry_after == 60
    assert caught.value.headers == {"Retry-After": "60"}
    assert "too many failed authentications" in str(caught.value)
    assert auth.authenticate(TOKEN, "b") == SESSION  # another client is unaffected
    clock.now += 60
    assert auth.authenticate(TOKEN, "a") == SESSION


def test_memory_is_bounded_by_forgetting_the_least_recent_client() -> None:
    clock = Clock()
    limiter = FailureLimiter(FailureBound(failures=1, window=60, clients=3, clock=clock))
    for client in ("a", "b", "c"):
        limiter.failed(client)
    limiter.failed("a")  # "a" failed most recently; "b" least recently
    limiter.failed("d")
    assert len(limiter) == 3
    assert limiter.retry_after("b") is None
    assert all(limiter.retry_after(c) is not None for c in ("a", "c", "d"))
    for n in range(100):
        limiter.failed(f"flood-{n}")
    assert len(limiter) == 3


@pytest.mark.parametrize(
    ("client", "key"),
    [
        (("192.0.2.7", 5000), "192.0.2.7"),
        (("::ffff:192.0.2.7", 5000), "192.0.2.7"),
        (("2001:db8:1:2:aaaa::1", 5000), "2001:db8:1:2::/64"),
        (("2001:db8:1:2:bbbb::9", 5000), "2001:db8:1:2::/64"),
        (("2001:db8:1:3::1", 5000), "2001:db8:1:3::/64"),
        (("testclient", 50000), "testclient"),
        (None, ""),
    ],
)
def test_a_client_is_its_address_or_its_ipv6_slash_64(
    client: tuple[str, int] | None, key: str
) -> None:
    assert client_key({"type": "http", "client": client}) == key


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("failures", 0),
        ("failures", 1.5),
        ("failures", True),
        ("clients", 0),
        ("window", 0),
        ("window", -1.0),
        ("window", float("inf")),
        ("window", "60"),
    ],
)
def test_a_bad_bound_is_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"FailureBound.{field} must be"):
        FailureBound(**{field: value})  # type: ignore[arg-type]
