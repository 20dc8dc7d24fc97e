"""A ``foreach`` node on the flow engine: one body per list element, durable per item.

The body is, per item, a tool call (``body: {kind: tool, ...}``), a pure template
(``body: {kind: value, value: ...}``), a run of a saved child artifact (``body:
{kind: workflow, workflow, input}``), each with ``{input, state, item, index}`` in scope,
or inline nodes (``body: {kind: sequence, state, start, nodes}``: an anonymous child,
`flowledger.deploy.artifacts.sequence`). A child or sequence body runs as a nested flow
run per item (`flowledger.deploy.runs.nesting`; built by
`flowledger.deploy.runs.compile`): the item's result is the end node's ``{outcome,
output}``, and the nested run's failure is the item's (`ForeachChildError`, when it is
one ``on_item_error`` decides about: see `CHILD_ITEM_ERRORS`). To this module such a
body is an `ItemCall` like a tool body's, over the evaluated ``input`` (a child) or the
item's scope (a sequence).

The node compiles to one vertex that routes back to itself until every item is done.
Each execution of the vertex (one super-step, so one checkpoint) runs a *batch*: the next
item (``mode: serial``), or the next ``max_concurrency`` items at once (``mode:
concurrent``; a batch ends when its slowest item does). State keys under the vertex's
scope (``V`` is the vertex id; none of them can collide with a state field):

* ``$each/V/items``: the list, evaluated once on entry (``null`` when no visit is under
  way: the next execution starts a new visit and evaluates ``items`` again);
* ``$each/V/next``: how many items are done (the next batch starts there);
* ``$each/V/<c>``: the records of items ``c * 32`` to ``c * 32 + 31`` (a *chunk*, in
  item order), each ``{"ok": true, "result": r}`` or ``{"ok": false, "error": {"code",
  "message"}}``. A step rewrites only the chunks its batch touched, so a checkpoint's
  bytes grow with a chunk, not with the list; and the state holds at most 32 chunk keys
  per foreach, not a key per item (the flow engine decodes every field of a checkpoint
  it reads, so a key per item made each step cost more than the last).

When the last batch is done, the same execution writes ``into`` (see `collected`) and
sets all those keys to ``null``, and the vertex continues at ``next``.

Durability: a crash loses at most the batch under way; the batch runs again after
adoption, and items of earlier batches never do. A child item runs again from the
child's start (its nested checkpoints are in memory), under the same nested run id, so
its tool nodes' intents (keyed by the nested run's idempotency keys) still hold: a call
of a tool that is not read-only or idempotent that returned is not made again (its
result is reused), and one that was under way fails the run (``tool_outcome_unknown``).
Inside the batch, a tool body whose tool is not read-only or idempotent keeps a
`ToolIntents` record per item (its key is the vertex's flow idempotency key and the
item's index): an item whose call returned is not called
again (its result is reused), and an item whose call was under way fails the run with
``tool_outcome_unknown`` (the rule of tool nodes), whatever ``on_item_error`` says.
A read-only or idempotent tool may simply be called again.

Item errors are what ``on_item_error`` decides about: the tool answered with an error
(``tool_error``), the arguments are not an object or do not match the tool's input
schema (``tool_arguments_invalid``), the result is too large, or an expression of the
body failed. ``fail`` fails the run at the first such item (in item order within its
batch, with `ForeachItemError`); ``skip`` leaves the item out of the results; ``collect``
keeps every item's record. Every other failure (a lost connection, a changed contract,
an unknown outcome, a timeout) fails the run, like a tool node's without ``on_error``: a
body has no ``retry`` or ``on_error`` (a tool node's failure outcomes) of its own.

Bounds (docs/deploy.md, "Limits"): ``items`` must give an array of at most
`MAX_FOREACH_ITEMS` elements (`ForeachItemsError` otherwise, naming the node; nothing
is run), and ``max_concurrency`` is at most `MAX_FOREACH_CONCURRENCY` (validation).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..artifacts.errors import ExpressionError
from ..artifacts.expressions import Expression, Template
from ..artifacts.limits import MAX_FOREACH_ITEMS
from ..artifacts.model import ForeachNode
from ..sources.errors import ToolArgumentsError
from .errors import (
    ForeachChildError,
    ForeachItemError,
    ForeachItemsError,
    NodeOutputError,
    ToolErrorResult,
    ToolResultTooLargeError,
)
from .offload import off_loop

__all__ = [
    "CHILD_ITEM_ERRORS",
    "ITEM_ERRORS",
    "ForeachStep",
    "ItemCall",
    "collected",
    "item_key_suffix",
]

# The failures of one item that `on_item_error` decides about; any other fails the run.
ITEM_ERRORS: Final = (
    ToolErrorResult,
    ToolArgumentsError,
    ToolResultTooLargeError,
    ExpressionError,
    ForeachChildError,
)
# What a child item's run may fail with that is the item's failure (a child body raises
# it as `ForeachChildError`): what the item errors of a tool body are, plus a value the
# child computed that does not match its schema (an end node's output) and a nested
# foreach's own item failures. Lost connections, timeouts, unknown outcomes and changed
# contracts inside the child fail the run, as they do in a tool body.
CHILD_ITEM_ERRORS: Final = (
    ToolErrorResult,
    ToolArgumentsError,
    ToolResultTooLargeError,
    ExpressionError,
    NodeOutputError,
    ForeachItemError,
    ForeachItemsError,
    ForeachChildError,
)
_MESSAGE_CHARS: Final = 300
CHUNK: Final = 32  # item records per state key

Update = dict[str, Any]
# A tool body's call (or a child body's run) for one item: (arguments or input, index)
# -> the item's result; a sequence body's run is given the item's scope ``{input, state,
# item, index}`` instead. It raises an item error, or anything that fails the run.
ItemCall = Callable[[dict[str, Any], int], Awaitable[Any]]


def item_key_suffix(index: int) -> str:
    """What an item's call adds to the vertex's flow idempotency key (its intent key)."""
    return f"/item={index}"


def collected(records: list[Mapping[str, Any]], on_item_error: str) -> list[Any]:
    """What ``into`` receives, in item order: ``fail`` and ``skip``, the results of the
    items that succeeded (``fail`` only gets here when all did); ``collect``, every
    item's record, ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {"code",
    "message"}}``."""
    if on_item_error == "collect":
        return [dict(record) for record in records]
    return [record["result"] for record in records if record.get("ok") is True]


@dataclass(frozen=True)
class ForeachStep:
    """One execution of a foreach vertex (see the module docstring)."""

    name: str  # the node's name in errors (``w/node`` inside a child)
    vertex: str
    node: ForeachNode
    items: Expression
    body: Template | None  # the value template (a value body)
    arguments: Template | None  # the arguments (a tool body) or input (a child) template
    call: ItemCall | None  # a tool body's call, or a child or sequence body's run
    into: str  # the state key of `into`

    @property
    def items_key(self) -> str:
        return f"$each/{self.vertex}/items"

    @property
    def next_key(self) -> str:
        return f"$each/{self.vertex}/next"

    def chunk_key(self, chunk: int) -> str:
        return f"$each/{self.vertex}/{chunk}"

    def running(self, state: Mapping[str, Any]) -> bool:
        """Whether the visit goes on (the vertex runs again) after the committed step."""
        return state.get(self.items_key) is not None

    def initial(self) -> Update:
        return {self.items_key: None, self.next_key: None}

    async def __call__(
        self, state: Mapping[str, Any], view: Mapping[str, Any]
    ) -> tuple[Update, range]:
        """The batch after what ``state`` has done, as a state update, and the batch's
        indexes; starts a visit when none is under way."""
        update: Update = {}
        items = state.get(self.items_key)
        if items is None:
            items = await off_loop(self.items.evaluate, view)
            if not isinstance(items, list):
                raise ForeachItemsError(
                    self.name, f"`items` gave {_json_type(items)}, not an array; nothing was run"
                )
            if len(items) > MAX_FOREACH_ITEMS:
                raise ForeachItemsError(
                    self.name,
                    f"`items` gave {len(items)} elements; the limit is {MAX_FOREACH_ITEMS} "
                    "per visit; nothing was run",
                )
            done = 0
            update[self.items_key] = items
        else:
            done = int(state.get(self.next_key) or 0)
        width = 1 if self.node.mode == "serial" else self.node.max_concurrency
        batch = range(done, min(done + width, len(items)))
        outcomes = await asyncio.gather(*(self._item(view, items[i], i) for i in batch))
        for index, (record, fatal) in zip(batch, outcomes, strict=True):
            if fatal is not None:
                raise fatal
            if record["ok"] is not True and self.node.on_item_error == "fail":
                error = record["error"]
                raise ForeachItemError(
                    self.name, f"item {index} failed ({error['code']}): {error['message']}"
                )
            key = self.chunk_key(index // CHUNK)
            if key not in update:  # the chunk so far (a new visit's first records start it)
                update[key] = [] if index % CHUNK == 0 else list(state.get(key) or ())
            update[key].append(record)
        done = batch.stop
        if done < len(items):
            update[self.next_key] = done
            return update, batch
        chunks = range((done + CHUNK - 1) // CHUNK)
        records = [
            record
            for chunk in chunks
            for record in update.get(self.chunk_key(chunk))
            or state.get(self.chunk_key(chunk))
            or ()
        ]
        update[self.into] = collected(records, self.node.on_item_error)
        update.update({self.chunk_key(chunk): None for chunk in chunks})
        update.update(self.initial())
        return update, batch

    async def _item(
        self, view: Mapping[str, Any], item: Any, index: int
    ) -> tuple[dict[str, Any], BaseException | None]:
        """``(record, None)``, or ``({}, error)`` for a failure that fails the run."""
        scope = {**view, "item": item, "index": index}
        try:
            if self.call is None:
                assert self.body is not None  # a value body
                result = await off_loop(self.body.evaluate, scope)
            elif self.arguments is None:  # a sequence body: it reads the whole scope
                result = await self.call(scope, index)
            else:  # a tool or child body
                arguments = await off_loop(self.arguments.evaluate, scope)
                result = await self.call(arguments, index)
        except ITEM_ERRORS as exc:
            code = getattr(exc, "code", "node_failed")
            return {"ok": False, "error": {"code": code, "message": _message(exc)}}, None
        except Exception as exc:  # fails the run, once the batch's other items are done
            return {}, exc
        return {"ok": True, "result": result}, None


def _message(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an object" if isinstance(value, dict) else type(value).__name__
