"""A miss is confirmed before anything is written on the strength of it.

A run whose record says it has checkpoints (or an input, or a seed) and whose store does
not find them is a contradiction: either the data was deleted, or the store's own
structures are damaged so that a lookup misses what is stored (a flipped byte in an
SQLite index page reads exactly like absence). Failing the run would turn damage that a
repair could undo into a permanent, wrong verdict. So before a write that rests on such a
miss - failing a run as "checkpoint missing" or "input unavailable", starting a run again
whose seed was not found - the supervisor asks the store to confirm it
(`storage.Integrity.confirm_absent`: the table read without the index, and the engine's
check of it). Confirmed, the write goes ahead as before; not confirmed, it raises
`CorruptRecordError` (its cause the storage `CorruptDataError`) and nothing is written:
the run stays as it was for an operator (``flowledger check``). A supervisor built without
``integrity`` trusts misses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....storage import CorruptDataError
from ....storage.integrity import Kind
from ...errors import CorruptRecordError
from ...records.run import Run, inputs_prefix

if TYPE_CHECKING:
    from .owner import Supervisor

__all__ = ["confirm_checkpoints_missing", "confirm_input_missing"]


async def _confirm(sup: Supervisor, kind: Kind, name: str) -> None:
    integrity = sup.integrity
    if integrity is None:
        return
    try:
        await integrity.confirm_absent(kind, name)
    except CorruptDataError as exc:
        raise CorruptRecordError(name, exc) from exc


async def confirm_checkpoints_missing(sup: Supervisor, run: Run) -> None:
    """The run's checkpoint log (its ``ledger_locator``) is really empty."""
    await _confirm(sup, "log", run.ledger_locator)


async def confirm_input_missing(sup: Supervisor, run: Run) -> None:
    """The run's input blob is really absent (a reference outside the session's inputs
    is never looked up, so there is no miss to confirm)."""
    key = run.input.key
    if isinstance(key, str) and key.startswith(inputs_prefix(run.session_id)):
        await _confirm(sup, "blob", key)
