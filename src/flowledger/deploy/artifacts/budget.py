"""The accounting of one bounded evaluation (docs/deploy.md, "Limits").

An evaluation is one template (all its expressions together) or one condition, spending
one `EvaluationBudget`:

* **work**, in steps: one per node of the expression visited (a projection's body once
  per element, a function's ``&expression`` once per use); for every value the
  evaluation measures, one more, and one per `VALUES_PER_STEP` JSON values and per
  `MEASURED_BYTES_PER_STEP` bytes of text in it; and one per `TEXT_BYTES_PER_STEP`
  bytes of text a function builds (``join``, ``to_string``, ``reverse``); at most
  `MAX_EVALUATION_STEPS`. Measuring is charged, so the time spent on accounting is
  bounded too; building text is charged, so all the text one evaluation ever builds is
  bounded (16 MiB), whatever it keeps;
* the **size** of every value it builds (a function's result, a projection, a filter, a
  flatten, a slice, a multi-select list or hash): at most `MAX_BUILT_VALUES` JSON values
  and `MAX_VALUE_BYTES` bytes of text (the UTF-8 bytes of its strings and object keys).
  A value is counted as its JSON text would be: a list holding the same string twice
  counts it twice. So a doubling (``[x, x]``, ``join('', [x, x])``) is refused at the
  list holding the two references, which costs two pointers, before anything builds the
  doubled text, and no comparison, sort or ``to_string`` ever walks more than the bound.
  (The result of the evaluation has its own bound of `MAX_RESULT_VALUES` values, with
  the same text bound: `flowledger.deploy.artifacts.expressions`.)

Containers are measured member by member as they are built (`Tally`), so one is refused
at the first member that takes it over a bound, before it holds the others; measuring
one value stops as soon as it passes a bound, so it costs at most the bound. A member
that is the value built just before (a projection's multi-select, a function's result)
is added with the size recorded when it was built, not walked again.
"""

from __future__ import annotations

from typing import Any

from .limits import (
    MAX_BUILT_VALUES,
    MAX_EVALUATION_STEPS,
    MAX_VALUE_BYTES,
    MEASURED_BYTES_PER_STEP,
    TEXT_BYTES_PER_STEP,
    VALUES_PER_STEP,
)

__all__ = ["EvaluationBudget", "LimitExceeded", "Tally", "text_bytes"]


class LimitExceeded(Exception):
    """A bound passed inside an evaluation: ``limit`` (``steps``, ``values`` or
    ``bytes``), its ``bound`` and the ``node`` the evaluation was at. The expression
    turns it into an `ExpressionLimitError` with its place and text."""

    def __init__(self, limit: str, bound: int, node: str) -> None:
        super().__init__(f"{node}: over the {limit} limit of {bound}")
        self.limit = limit
        self.bound = bound
        self.node = node


def text_bytes(text: str) -> int:
    """The UTF-8 length of ``text`` (a lone surrogate, which JSON can carry, counts 3)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class EvaluationBudget:
    """What one evaluation has spent: ``steps`` so far, and ``longest_string``, the UTF-8
    length of the longest string it measured (every string a function returned; ``join``
    and ``to_string`` refuse before building a string over the bound). Not thread-safe:
    one evaluation, one thread."""

    __slots__ = ("last", "longest_string", "steps")

    def __init__(self) -> None:
        self.steps = 0
        self.longest_string = 0
        # The value built last and its (values, text): a container holding it (a
        # projection of multi-selects, say) adds these instead of walking it again.
        self.last: tuple[Any, int, int] | None = None

    def charge(self, steps: int, node: str) -> None:
        """Spend ``steps``; `LimitExceeded` past `MAX_EVALUATION_STEPS`."""
        self.steps += steps
        if self.steps > MAX_EVALUATION_STEPS:
            raise LimitExceeded("steps", MAX_EVALUATION_STEPS, node)

    def charge_size(self, values: int, text: int, node: str) -> None:
        """Spend what measuring a value of ``values`` and ``text`` bytes costs."""
        self.charge(1 + values // VALUES_PER_STEP + text // MEASURED_BYTES_PER_STEP, node)

    def charge_text(self, text: int, node: str) -> None:
        """Spend what building ``text`` bytes of new text costs."""
        self.charge(text // TEXT_BYTES_PER_STEP, node)

    def measure(self, value: Any, node: str) -> tuple[int, int]:
        """``(values, text bytes)`` of ``value``, built at ``node``: charged, and
        `LimitExceeded` if it is over a bound."""
        tally = Tally(self, node, values=0)
        tally.add(value)
        return tally.done(value)

    def size(self, value: Any, values_room: int, text_room: int) -> tuple[int, int]:
        """``(values, text bytes)`` of ``value``, counted as its JSON text would be; the
        count stops once it is over ``values_room`` or ``text_room`` (so the result is
        exact when within them, and over a room otherwise). Not charged: `Tally` does."""
        values = text = 0
        pending = [value]
        while pending:
            item = pending.pop()
            values += 1
            if isinstance(item, str):
                size = text_bytes(item)
                text += size
                if size > self.longest_string:
                    self.longest_string = size
            elif isinstance(item, list):
                if values + len(item) > values_room:  # each member is one value at least
                    return values + len(item), text
                pending.extend(item)
            elif isinstance(item, dict):
                if values + len(item) > values_room:
                    return values + len(item), text
                for key in item:  # JSON keys are strings; others count nothing
                    if isinstance(key, str):
                        text += text_bytes(key)
                pending.extend(item.values())
            if values > values_room or text > text_room:
                break
        return values, text


class Tally:
    """The size of one value being built at ``node``, member by member: `add` measures a
    member (and its key, for an object), charges the measuring (`charge_size` of the
    totals), and raises `LimitExceeded` as soon as the total is over a bound. ``values``
    starts at 1, the container itself (0 to measure a single value)."""

    __slots__ = ("budget", "charged", "node", "text", "values")

    def __init__(self, budget: EvaluationBudget, node: str, *, values: int = 1) -> None:
        self.budget = budget
        self.node = node
        self.values = values
        self.text = 0
        self.charged = 0  # the steps the measuring has cost so far

    def add(self, item: Any, key: str | None = None) -> None:
        last = self.budget.last
        if last is not None and last[0] is item:  # measured when it was built
            values, text = last[1], last[2]
        elif isinstance(item, list | dict):
            values, text = self.budget.size(
                item, MAX_BUILT_VALUES - self.values, MAX_VALUE_BYTES - self.text
            )
        elif isinstance(item, str):  # the common members, measured here: no call of size
            values, text = 1, text_bytes(item)
            if text > self.budget.longest_string:
                self.budget.longest_string = text
        else:
            values, text = 1, 0
        if key is not None:
            text += text_bytes(key)
        self.values += values
        self.text += text
        if self.values > MAX_BUILT_VALUES:
            raise LimitExceeded("values", MAX_BUILT_VALUES, self.node)
        if self.text > MAX_VALUE_BYTES:
            raise LimitExceeded("bytes", MAX_VALUE_BYTES, self.node)
        # Charged on the running totals, so a container of many small members costs a
        # step per VALUES_PER_STEP of them, not one per member.
        due = 1 + self.values // VALUES_PER_STEP + self.text // MEASURED_BYTES_PER_STEP
        self.budget.charge(due - self.charged, self.node)
        self.charged = due

    def done(self, value: Any) -> tuple[int, int]:
        """The value is built: remember its size (`EvaluationBudget.last`) and return it
        as ``(values, text bytes)``."""
        self.budget.last = (value, self.values, self.text)
        return self.values, self.text
