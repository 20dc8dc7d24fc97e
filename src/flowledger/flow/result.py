"""What `Runner.run`, `resume` and `get` return."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from .checkpoint import HaltKind, InterruptKind, RunRecord

__all__ = ["Halt", "Interruption", "Result", "StoredError"]

S = TypeVar("S")


class StoredError(Exception):
    """An error known only by the text a checkpoint stored (results rebuilt by `get`).
    ``type_name`` is the class name of the original exception when it was stored."""

    def __init__(self, message: str, type_name: str = "") -> None:
        super().__init__(message)
        self.type_name = type_name


@dataclass(frozen=True, slots=True)
class Interruption:
    """A paused vertex. ``info`` is what the task passed to `interrupt` (JSON data when the
    result was rebuilt from storage); ``cause`` is the failure of an errored pause.
    ``wake_at`` is when a timer pause is due or an awaiting pause's deadline, and
    ``on_timeout`` the payload such a deadline resumes with (see `InterruptRecord`)."""

    graph_run_id: str
    vertex: str
    kind: InterruptKind
    info: Any = None
    cause: BaseException | None = None
    wake_at: datetime | None = None
    on_timeout: Any = None


@dataclass(frozen=True, slots=True)
class Halt:
    graph_run_id: str
    kind: HaltKind
    step: int
    cause: BaseException


@dataclass(frozen=True, slots=True)
class Result(Generic[S]):
    """``run.status`` is never RUNNING here. At most one of ``interrupts`` and ``halt`` is
    set; both are ``None`` on a completed or cancelled run."""

    run: RunRecord
    state: S
    interrupts: list[Interruption] | None = None
    halt: Halt | None = None
