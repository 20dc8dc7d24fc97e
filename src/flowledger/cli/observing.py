"""The long-running commands' observability options: ``--log-format``, ``--metrics-port``.

Kept free of the HTTP stack (the CLI imports it at start-up): the worker's listener is
`flowledger.cli.metrics_listener`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from ..observability import logs

__all__ = [
    "LogFormatChoice",
    "LogFormatOption",
    "MetricsHostOption",
    "MetricsPortOption",
    "log_format",
]


class LogFormatChoice(StrEnum):
    """The values of ``--log-format`` (`flowledger.observability.logs.FORMATS`)."""

    HUMAN = "human"
    JSON = "json"


LogFormatOption = Annotated[
    LogFormatChoice,
    typer.Option(
        "--log-format",
        case_sensitive=False,
        help="Log lines on stderr: human (as before) or json (one object a line: time, "
        "level, event, run_id, message).",
    ),
]
MetricsPortOption = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        metavar="PORT",
        min=0,
        max=65535,
        help="Serve Prometheus metrics at http://HOST:PORT/metrics (0: any free port; "
        "needs the 'prometheus' extra).",
        show_default=False,
    ),
]
MetricsHostOption = Annotated[
    str,
    typer.Option(
        "--metrics-host", metavar="HOST", help="With --metrics-port: the address to listen on."
    ),
]


def log_format(value: LogFormatChoice) -> logs.LogFormat:
    """The option's value as `flowledger.observability.logs.configure` takes it."""
    return "json" if value is LogFormatChoice.JSON else "human"
