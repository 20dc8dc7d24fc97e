"""``flowledger limits set|clear --source NAME``: call rate limits of registered sources
(`flowledger.deploy.registry.rates`), the part of ``flowledger limits`` that is about
calls rather than runs. An operator's command: no MCP tool or dashboard page sets them.
"""

from __future__ import annotations

from typing import Any

import typer

from .runtime import Options, emit_json, run_command, stdout_console

__all__ = ["clear_rate", "rate_rows", "set_rate"]


def _usage(exc: Any) -> typer.BadParameter:
    """The typed error as a usage error (exit 2) naming the option."""
    message = str(exc).removeprefix(f"{exc.field}: ")
    return typer.BadParameter(message, param_hint=f"--{exc.field}")


def set_rate(
    source: str, calls: int | None, per: str | None, db: str | None, as_json: bool
) -> None:
    """Limit calls to ``source``: validated (the source must be registered) before
    anything is written."""
    from ..deploy.registry.rates import InvalidRateError, RateLimits, check_calls, parse_per
    from ..deploy.registry.store import SourceRegistry
    from ..storage import open_store

    if calls is None or per is None:
        raise typer.BadParameter("a source's limit needs --calls N and --per DURATION")
    try:  # what needs no database is checked before one is opened
        check_calls(calls)
        parse_per(per)
    except InvalidRateError as exc:
        raise _usage(exc) from None
    options = Options(db)
    refused: list[InvalidRateError] = []

    async def work() -> None:
        async with open_store(options.url) as store:
            try:
                rate = await RateLimits(SourceRegistry.over(store)).set(source, calls, per)
            except InvalidRateError as exc:
                refused.append(exc)  # a usage error, raised outside the event loop
                return
        if as_json:
            emit_json({"scope": f"source/{source}", **rate.to_json()})
        else:
            stdout_console().print(f"source {source}: at most {rate.calls} calls per {per}")

    run_command(work)
    if refused:
        raise _usage(refused[0])


def clear_rate(source: str, db: str | None) -> None:
    from ..deploy.registry.rates import InvalidRateError, RateLimits
    from ..deploy.registry.store import SourceRegistry
    from ..storage import open_store

    options = Options(db)

    refused: list[InvalidRateError] = []

    async def work() -> None:
        async with open_store(options.url) as store:
            try:
                removed = await RateLimits(SourceRegistry.over(store)).clear(source)
            except InvalidRateError as exc:
                refused.append(exc)
                return
        stdout_console().print(f"source {source}: " + ("limit removed" if removed else "no limit"))

    run_command(work)
    if refused:
        raise _usage(refused[0])


async def rate_rows(store: Any) -> list[dict[str, Any]]:
    """Every source's limit as ``limits show`` lists it, with the calls in its window."""
    from ..deploy.registry.rates import RateLimits
    from ..deploy.registry.store import SourceRegistry

    limits = RateLimits(SourceRegistry.over(store))
    return [
        {"scope": f"source/{name}", **rate.to_json(), "in_window": await limits.in_window(name)}
        for name, rate in await limits.all()
    ]
