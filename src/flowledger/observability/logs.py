"""Log records as one JSON object per line, for log collectors (``--log-format json``).

Built on the stdlib `logging` module: `JsonFormatter` is a `logging.Formatter`, and
`configure` puts it on the root logger's stderr handler. Each line is an object with
``time`` (ISO 8601, UTC, milliseconds), ``level`` (lowercase), ``event`` (the record's
``event`` extra if it has one, else the logger's name: what kind of thing happened),
``message`` (the formatted message), and ``run_id`` when the record was logged while a
run was being worked on (`run_context`, set by the supervisor for each run's tasks) or
names one itself (``extra={"run_id": ...}``). An exception adds ``error``: its type name
only, never its text or traceback, which may quote a run's state or a tool's result.

The human format (the default) is whatever the command printed before; `configure`
with ``"human"`` changes nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Final, Literal

__all__ = [
    "FORMATS",
    "JsonFormatter",
    "LogFormat",
    "configure",
    "current_run_id",
    "json_active",
    "run_context",
    "serving",
]

LogFormat = Literal["human", "json"]
FORMATS: Final = ("human", "json")

_run_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "flowledger_log_run_id", default=None
)
_json_handler: logging.Handler | None = None


def current_run_id() -> str | None:
    """The run the current task works on, if any."""
    return _run_id.get()


@contextlib.contextmanager
def run_context(run_id: str | None) -> Iterator[None]:
    """Records logged in this context (and tasks created in it) name ``run_id``."""
    if run_id is None:
        yield
        return
    token = _run_id.set(run_id)
    try:
        yield
    finally:
        _run_id.reset(token)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (see the module documentation)."""

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created, UTC)
        line: dict[str, object] = {
            "time": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "event": str(getattr(record, "event", None) or record.name),
            "message": record.getMessage(),
        }
        run_id = getattr(record, "run_id", None) or _run_id.get()
        if run_id:
            line["run_id"] = str(run_id)
        if record.exc_info and record.exc_info[0] is not None:
            line["error"] = record.exc_info[0].__name__
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def serving(line: str) -> None:
    """A server's "serving on" line for stderr: a JSON record under the JSON format (so
    every line there is one object), else the plain line it always was."""
    if _json_handler is not None:
        logging.getLogger("flowledger.serve").warning(line, extra={"event": "serving"})
    else:
        print(line, file=sys.stderr, flush=True)


def json_active() -> bool:
    """Whether `configure` switched this process to JSON lines."""
    return _json_handler is not None


def configure(fmt: LogFormat, *, level: int = logging.INFO) -> None:
    """``"json"``: the root logger writes JSON lines to stderr (replacing its handlers)
    and ``flowledger`` loggers log from ``level`` at least (a lower level set already,
    as ``FLOWLEDGER_DEBUG`` sets, is kept); ``"human"``: nothing changes."""
    global _json_handler
    if fmt == "human":
        return
    if fmt != "json":
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    if root.level > logging.WARNING or root.level == logging.NOTSET:
        root.setLevel(logging.WARNING)
    ours = logging.getLogger("flowledger")
    if ours.getEffectiveLevel() > level:  # FLOWLEDGER_DEBUG's DEBUG stays DEBUG
        ours.setLevel(level)
    _json_handler = handler
