"""The bounded JMESPath interpreter: jmespath's own, through its extension points.

`BoundedInterpreter` is jmespath's `TreeInterpreter` with an `EvaluationBudget`: every
node visit is a step, and every node that builds a value (a projection, a filter, a
flatten, a slice, a multi-select list or hash) measures it member by member as it
builds (`Tally`). `BoundedFunctions` is jmespath's function table with every result
measured; ``map`` measures as it builds, and ``join`` and ``to_string`` compute the
exact size of the string they would build first (`json_text_length` for
``to_string``'s escapes), so no string over the bound is ever built. The values, the
semantics and the error messages are jmespath's: the overrides add accounting only.
See `flowledger.deploy.artifacts.budget` for what is counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

import jmespath
import jmespath.functions
import jmespath.visitor
from jmespath.functions import signature

from .budget import EvaluationBudget, LimitExceeded, Tally, text_bytes
from .json_text import json_text_length
from .limits import MAX_EVALUATION_STEPS, MAX_VALUE_BYTES

__all__ = ["BoundedFunctions", "BoundedInterpreter", "describe"]

_BUILDERS: Final = {
    "projection": "a projection",
    "value_projection": "an object projection `*`",
    "filter_projection": "a filter projection `[?...]`",
    "flatten": "a flatten `[]`",
    "slice": "a slice",
    "multi_select_list": "a multi-select list `[...]`",
    "multi_select_dict": "a multi-select hash `{...}`",
}
_SELF_MEASURED: Final = frozenset({"map"})  # functions that measure as they build
_TEXT_BUILDERS: Final = frozenset({"join", "to_string", "reverse"})  # make new text
_JMESPATH: Final[dict[str, Any]] = jmespath.functions.Functions.FUNCTION_TABLE


def describe(node: Any) -> str:
    """Words for an expression node, for an error: ``join()``, ``a projection``, ..."""
    kind = str(node.get("type"))
    if kind == "function_expression":
        return f"{node.get('value')}()"
    if kind == "field":
        return f"the field `{node.get('value')}`"
    return _BUILDERS.get(kind, kind.replace("_", " "))


class BoundedFunctions(jmespath.functions.Functions):
    """jmespath's functions, each result measured against the evaluation's budget."""

    def __init__(self, budget: EvaluationBudget) -> None:
        self._budget = budget

    def call_function(self, function_name: str, resolved_args: Iterable[Any]) -> Any:
        result = super().call_function(function_name, resolved_args)
        if function_name not in _SELF_MEASURED:
            node = f"{function_name}()"
            _, text = self._budget.measure(result, node)
            if function_name in _TEXT_BUILDERS and isinstance(result, str):
                self._budget.charge_text(text, node)
        return result

    @signature({"types": ["expref"]}, {"types": ["array"]})
    def _func_map(self, expref: Any, arg: list[Any]) -> list[Any]:
        tally = Tally(self._budget, "map()")
        result = []
        for element in arg:
            current = expref.visit(expref.expression, element)
            tally.add(current)
            result.append(current)
        tally.done(result)
        return result

    @signature({"types": ["string"]}, {"types": ["array-string"]})
    def _func_join(self, separator: str, array: list[str]) -> str:
        size = text_bytes(separator) * max(len(array) - 1, 0)
        for part in array:
            size += text_bytes(part)
            if size > MAX_VALUE_BYTES:
                raise LimitExceeded("bytes", MAX_VALUE_BYTES, "join()")
        self._budget.charge_size(len(array), size, "join()")
        return str(_JMESPATH["join"]["function"](self, separator, array))

    @signature({"types": []})
    def _func_to_string(self, arg: Any) -> str:
        if not isinstance(arg, str):  # a string is returned as it is
            values, length = json_text_length(arg, MAX_VALUE_BYTES)  # ASCII: bytes = length
            if length > MAX_VALUE_BYTES:
                raise LimitExceeded("bytes", MAX_VALUE_BYTES, "to_string()")
            self._budget.charge_size(values, length, "to_string()")
        return str(_JMESPATH["to_string"]["function"](self, arg))


class BoundedInterpreter(jmespath.visitor.TreeInterpreter):
    """jmespath's interpreter spending ``budget``: a step per node visited, and a `Tally`
    for every value a node builds. Dictionaries are plain ``dict``."""

    _is_true: Callable[[Any], bool]  # jmespath's truth test (its stubs omit it)

    def __init__(self, budget: EvaluationBudget) -> None:
        self.budget = budget
        self._methods: dict[str, Callable[..., Any]] = {}
        super().__init__(jmespath.Options(dict_cls=dict, custom_functions=BoundedFunctions(budget)))

    def visit(self, node: Any, value: Any) -> Any:
        # Every node of the expression comes here: count it, then dispatch as jmespath's
        # Visitor.visit does (inlined: this is the interpreter's hottest path).
        budget = self.budget
        budget.steps += 1
        if budget.steps > MAX_EVALUATION_STEPS:
            raise LimitExceeded("steps", MAX_EVALUATION_STEPS, describe(node))
        kind = node["type"]
        method = self._methods.get(kind)
        if method is None:
            method = self._methods[kind] = getattr(self, f"visit_{kind}", self.default_visit)
        return method(node, value)

    # The builders: jmespath's loops, with each member measured before it is kept.

    def visit_projection(self, node: Any, value: Any) -> list[Any] | None:
        base = self.visit(node["children"][0], value)
        if not isinstance(base, list):
            return None
        return self._project(node, base, None)

    def visit_value_projection(self, node: Any, value: Any) -> list[Any] | None:
        base = self.visit(node["children"][0], value)
        if not isinstance(base, dict):
            return None
        return self._project(node, base.values(), None)

    def visit_filter_projection(self, node: Any, value: Any) -> list[Any] | None:
        base = self.visit(node["children"][0], value)
        if not isinstance(base, list):
            return None
        return self._project(node, base, node["children"][2])

    def _project(self, node: Any, base: Iterable[Any], condition: Any) -> list[Any]:
        body = node["children"][1]
        tally = Tally(self.budget, describe(node))
        collected: list[Any] = []
        for element in base:
            if condition is not None and not self._is_true(self.visit(condition, element)):
                continue
            current = self.visit(body, element)
            if current is not None:
                tally.add(current)
                collected.append(current)
        tally.done(collected)
        return collected

    def visit_flatten(self, node: Any, value: Any) -> list[Any] | None:
        base = self.visit(node["children"][0], value)
        if not isinstance(base, list):
            return None
        tally = Tally(self.budget, describe(node))
        merged: list[Any] = []
        for element in base:
            for item in element if isinstance(element, list) else (element,):
                tally.add(item)
                merged.append(item)
        tally.done(merged)
        return merged

    def visit_slice(self, node: Any, value: Any) -> Any:
        result = super().visit_slice(node, value)
        if result is not None:
            self.budget.measure(result, describe(node))
        return result

    def visit_multi_select_list(self, node: Any, value: Any) -> list[Any] | None:
        if value is None:
            return None
        tally = Tally(self.budget, describe(node))
        collected = []
        for child in node["children"]:
            current = self.visit(child, value)
            tally.add(current)
            collected.append(current)
        tally.done(collected)
        return collected

    def visit_multi_select_dict(self, node: Any, value: Any) -> Any:
        if value is None:
            return None
        tally = Tally(self.budget, describe(node))
        collected: dict[str, Any] = {}
        for child in node["children"]:
            key = child["value"]
            current = self.visit(child, value)
            tally.add(current, key)
            collected[key] = current
        tally.done(collected)
        return collected
