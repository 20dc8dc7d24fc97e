"""``flowledger resume RUN`` without ``--payload``: continue a run nobody executes any more.

A run is left ``running`` (or ``pending``) when the process that owned its session went
away before the run stopped. Any command that owns the session adopts such runs when it
starts (`Supervisor.activate`); ``resume RUN`` is the one that does nothing else: it
owns the session, follows the run with live progress while it continues from its last
checkpoint, and reports how it stopped.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from .runtime import CliError, Host
from .watch import Watch

__all__ = ["follow_left_run", "print_continue_hint", "refuse_payload_for_left_run"]

_UNFINISHED = ("pending", "running")


async def follow_left_run(
    host: Host, console: Console, run_id: str, *, quiet: bool
) -> BaseException | None:
    """Follow ``run_id`` (adopted by this owner) until the session is idle; return what
    `Supervisor.wait_idle` returns. A run that is not left running is refused first."""
    # Subscribed before anything awaits, so no activity of the adoption is missed.
    async with Watch(host.session, console, quiet=quiet) as watch:
        current = await host.call("workflow_run_get", {"run_id": run_id})
        status = str(current.get("run_status", ""))
        if status == "interrupted":
            raise CliError(
                f"run {run_id} is paused (interrupted): answer it with --payload JSON "
                f"(flowledger runs show {run_id} says what it waits for)"
            )
        if status not in _UNFINISHED:
            raise CliError(f"run {run_id} is {status}: there is nothing to continue")
        title = f"{current.get('definition_name', '')} {current.get('definition_version', '')}"
        if not quiet:
            console.print(
                Text.assemble(
                    ("continuing run ", "dim"),
                    (run_id, "bold"),
                    f"  {title}",
                    (f"  from revision {current.get('checkpoint_revision', 0)}", "dim"),
                )
            )
        await watch.follow(run_id, title)
        return await host.session.supervisor.wait_idle()


async def refuse_payload_for_left_run(host: Host, run_id: str) -> None:
    """``resume RUN --payload ...`` of a run that is not paused but left running: say
    which command continues it (the resume tool alone would only say it is running)."""
    try:
        current = await host.call("workflow_run_get", {"run_id": run_id})
    except Exception:
        return  # the resume call reports what is wrong with the run id, in its own words
    status = str(current.get("run_status", ""))
    if status in _UNFINISHED:
        command = shlex.join(["flowledger", "resume", run_id, *host.options.flags()])
        raise CliError(
            f"run {run_id} is {status}, not paused: it needs no payload; continue it with {command}"
        )


def print_continue_hint(console: Console, run: Mapping[str, Any], flags: Sequence[str]) -> None:
    """After ``runs show`` of a run nobody executes (``owner.live`` false): the command
    that continues it."""
    owner = run.get("owner")
    if not isinstance(owner, Mapping) or owner.get("live"):
        return
    command = shlex.join(["flowledger", "resume", str(run.get("run_id", "")), *flags])
    console.print()
    console.print(
        Text.assemble(
            ("nobody executes this run; continue it with: ", "dim"),
            command,
            (" (any command that owns the session continues it too)", "dim"),
        ),
        soft_wrap=True,
    )
