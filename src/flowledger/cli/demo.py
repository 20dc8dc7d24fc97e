"""``flowledger demo``: the built-in document review, run durably, end to end.

1. Start a ``document_review`` run on a sample document in this process, with live
   progress: intake, three parallel analyses (the summary fails once and is retried),
   the report, then the approval pauses the run.
2. Print the question, then let go of the session (shut the supervisor down) so that
3. a *new process* (``python -m flowledger resume ...``) can own the session and resume
   the run from its durable checkpoint.
4. Print the run's activity history and its final status. The database stays, so
   ``flowledger runs list`` shows the run afterwards.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import sys
from typing import Any, Final

from rich.console import Console
from rich.text import Text

from .render import history_table, render_pause, status_text
from .runtime import CliError, Host, Options, check_idle, open_host
from .watch import Watch, load_pause

__all__ = ["DEMO_DOCUMENT", "DEMO_PAYLOAD", "run_demo"]

DEMO_DEFINITION: Final = ("document_review", "v1")
DEMO_DOCUMENT: Final = {
    "title": "Flowledger 1.0 launch note",
    "document": (
        "Flowledger 1.0 ships today. "
        "It keeps every step of a workflow in an append-only history, so a run that stops "
        "for any reason, be it a crash, a deploy or a person who needs time to think, "
        "continues exactly where it left off on this machine or another one without "
        "repeating the work that already finished. "
        "Early users cut failed nightly jobs by 40% in their first month. "
        "Try the demo and tell us what you think."
    ),
}
DEMO_PAYLOAD: Final = {"approved": True, "note": "demo"}
CHILD_TIMEOUT: Final = 120.0


def _step(console: Console, number: int, title: str) -> None:
    console.print()
    console.print(Text.assemble((f" {number} ", "bold reverse cyan"), " ", (title, "bold")))


async def run_demo(options: Options, console: Console) -> None:
    """The whole demo; raises on failure (the caller prints one line)."""
    name, version = DEMO_DEFINITION
    console.print(
        Text.assemble(
            ("flowledger demo", "bold cyan"),
            " · a durable document review, paused and resumed elsewhere",
        )
    )
    async with open_host(options, owner=True) as host:
        try:
            host.session.catalog.resolve(name, version)
        except LookupError:
            raise CliError(
                f"the demo needs the built-in {name} {version} workflow, "
                "which this catalog (--app) does not have"
            ) from None
        console.print(
            Text.assemble(
                ("database ", "dim"),
                options.url,
                ("   session ", "dim"),
                host.session.session_id,
            )
        )
        flags = _follow_up_flags(options, host)

        _step(console, 1, "Start: intake, three analyses in parallel, report, approval")
        console.print(
            "  The summary fails once (a flaky model endpoint) and is retried.",
            style="dim",
        )
        run_id = await _start(host, console)

        _step(console, 2, "Paused, durably: the run waits for a decision")
        pause = await load_pause(host.session, run_id, flags)
        run = await host.call("workflow_run_get", {"run_id": run_id})
        if pause is None or run.get("run_status") != "interrupted":
            raise CliError(f"the demo run did not pause (it is {run.get('run_status')})")
        render_pause(console, pause, payload=DEMO_PAYLOAD, hint=False, indent=2)
        console.print(
            "  Every finished step is durable. This process now lets go of the session.",
            style="dim",
        )
        await host.session.supervisor.stop()  # adopted runs: at their next step boundary
        await host.session.supervisor.shutdown()

        _step(console, 3, "Resume from a new process")
        await _resume_in_child(console, options, host, run_id)

        _step(console, 4, "Activity history")
        tools = host.reader_tools()
        history = await tools.call("workflow_run_history", {"run_id": run_id, "limit": 100})
        console.print(history_table(history.get("entries", [])))
        console.print()
        final = await tools.call("workflow_run_get", {"run_id": run_id})

    status = str(final.get("run_status", ""))
    console.print(
        Text.assemble(
            ("Final status: ", "bold"),
            status_text(status),
            (f" ({final['status_summary']})" if final.get("status_summary") else ""),
        )
    )
    if status != "completed":
        raise CliError(f"the demo run ended {status}, not completed")
    console.print()
    console.print("The database is kept. Look around:", style="dim")
    for command in (
        ["flowledger", "runs", "list", *flags],
        ["flowledger", "runs", "show", run_id, *flags],
        ["flowledger", "history", run_id, *flags],
    ):
        console.print(Text.assemble(("  $ ", "dim"), shlex.join(command)), soft_wrap=True)


def _follow_up_flags(options: Options, host: Host) -> list[str]:
    flags: list[str] = []
    if options.db is not None:
        flags += ["--db", options.db]
    if options.session is not None:
        flags += ["--session", host.session.session_id]
    return flags


async def _start(host: Host, console: Console) -> str:
    name, version = DEMO_DEFINITION
    async with Watch(host.session, console) as watch:
        result = await host.call(
            "workflow_run_start",
            {"definition_name": name, "definition_version": version, "input": DEMO_DOCUMENT},
        )
        run_id = str(result["run_id"])
        console.print(Text.assemble(("  run ", "dim"), (run_id, "bold"), f"  {name} {version}"))
        await watch.follow(run_id, f"{name} {version}")
        error = await host.session.supervisor.wait_idle()
    check_idle(run_id, error)
    return run_id


async def _resume_in_child(console: Console, options: Options, host: Host, run_id: str) -> None:
    payload = json.dumps(DEMO_PAYLOAD)
    shown = ["flowledger", "resume", run_id, "--payload", payload]
    console.print(Text.assemble(("  $ ", "dim"), (shlex.join(shown), "bold")), soft_wrap=True)
    command = [
        sys.executable,
        "-m",
        "flowledger",
        "resume",
        run_id,
        "--payload",
        payload,
        "--db",
        options.url,
        "--session",
        host.session.session_id,
    ]
    code = await asyncio.to_thread(_run_child, console, command)
    if code != 0:
        raise CliError(f"the resuming process failed (exit code {code})")


def _run_child(console: Console, command: list[str]) -> int:
    """Run the child with this process's stdout and stderr; when they are not real files
    (a test runner's capture), relay its output through ``console`` instead."""
    console.file.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        sys.stdout.fileno()
        sys.stderr.fileno()
        inherit = True
    except (AttributeError, OSError, ValueError):
        inherit = False
    try:
        if inherit:
            return subprocess.run(command, timeout=CHILD_TIMEOUT, check=False).returncode
        done = subprocess.run(
            command,
            timeout=CHILD_TIMEOUT,
            check=False,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
    except subprocess.TimeoutExpired:
        raise CliError(f"the resuming process did not finish within {CHILD_TIMEOUT:.0f}s") from None
    except OSError as exc:
        raise CliError(f"cannot start the resuming process: {exc}") from None
    output: Any = done.stdout
    if output:
        console.print(Text(str(output).rstrip("\n")), soft_wrap=True)
    return done.returncode
