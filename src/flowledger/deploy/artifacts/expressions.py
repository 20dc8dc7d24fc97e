"""Expressions and templates: JMESPath, compiled once at validation.

A string that is entirely ``${ ... }`` is an expression; its value keeps its type
(``"${ input.count }"`` is a number if the count is). Any other string is a literal,
except that a string holding ``${`` without being one whole expression is refused:
there is no interpolation, and silently keeping ``"Hi ${ input.name }"`` as text would
surprise. (A literal containing ``${`` is written as a JMESPath raw string:
``"${ '${not evaluated}' }"``.) Objects and arrays are templates: each member is a
template again; keys are always literal.

An expression reads one scope object ``{input, state, result, resume}``; each place
allows only some of those names (``result`` after a tool or child run, ``resume`` after
an interrupt). JMESPath always terminates and depends only on its input, so evaluating
again after a restart gives the same value. Static checks here: syntax, the length
bound, function names and argument counts, expression arguments (``&expr``) only where
a function takes one, and the root names an expression reads. What each root name's
fields may be is checked by the artifact validation, from `Expression.references`.

Evaluation is bounded (`flowledger.deploy.artifacts.budget`): each evaluation of a
template (all its expressions together) or a condition spends one `EvaluationBudget`,
through the `BoundedInterpreter`, and its result is bounded like every value it built.
Past a bound it stops with an `ExpressionLimitError`. Evaluation is synchronous and
CPU-bound (up to the bounds): a server runs it off its event loop
(`flowledger.deploy.runs.offload`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

import jmespath
import jmespath.exceptions
import jmespath.parser

from .budget import EvaluationBudget, LimitExceeded, text_bytes
from .errors import ArtifactIssue, ExpressionError, ExpressionLimitError, place_of
from .interpreter import BoundedFunctions, BoundedInterpreter
from .limits import MAX_EXPRESSION_CHARS, MAX_RESULT_VALUES, MAX_VALUE_BYTES

__all__ = [
    "SCOPE_NAMES",
    "Expression",
    "Template",
    "compile_condition",
    "compile_template",
    "is_expression",
    "truthy",
]

SCOPE_NAMES: Final = ("input", "state", "result", "resume")

_WHOLE: Final = re.compile(r"\$\{(.*)\}", re.DOTALL)
_FUNCTIONS: Final[Mapping[str, Any]] = BoundedFunctions.FUNCTION_TABLE
# How each AST node type evaluates its children: against the value the node itself is
# evaluated against ("same"), or against something derived from it ("other").
_FIRST_SAME: Final = frozenset(
    {
        "subexpression",
        "index_expression",
        "projection",
        "value_projection",
        "filter_projection",
        "pipe",
        "flatten",
    }
)
_ALL_SAME: Final = frozenset(
    {
        "comparator",
        "and_expression",
        "or_expression",
        "not_expression",
        "multi_select_list",
        "multi_select_dict",
        "key_val_pair",
        "function_expression",
    }
)


def is_expression(value: object) -> bool:
    """Whether ``value`` is a string that is entirely ``${ ... }``."""
    return isinstance(value, str) and _WHOLE.fullmatch(value) is not None


def truthy(value: Any) -> bool:
    """JMESPath truth: ``false``, ``null``, ``""``, ``[]`` and ``{}`` are false; everything
    else (``0`` included) is true."""
    if value is None or value is False:
        return False
    if isinstance(value, str | list | dict):
        return len(value) > 0
    return True


@dataclass(frozen=True, slots=True, eq=False)
class Expression:
    """One compiled expression. ``references`` are the field chains it reads from the
    scope, such as ``("state", "items")`` for ``state.items[0]``; a chain of one name
    reads the whole object."""

    place: str
    source: str
    parsed: jmespath.parser.ParsedResult
    references: tuple[tuple[str, ...], ...]

    def evaluate(self, scope: Mapping[str, Any], budget: EvaluationBudget | None = None) -> Any:
        """The expression's value over ``scope``, as a fresh copy that shares nothing
        with ``scope``; `ExpressionError` (with this place) for a JMESPath type error, a
        number out of range or a non-finite one; `ExpressionLimitError` past a limit of
        the evaluation (of its ``budget``: a fresh one unless given)."""
        budget = EvaluationBudget() if budget is None else budget
        return _checked_copy(self.search(scope, budget), self.place, budget, self.source)

    def search(self, scope: Mapping[str, Any], budget: EvaluationBudget | None = None) -> Any:
        """The raw JMESPath value, which may share parts with ``scope``, spending
        ``budget`` (a fresh one unless given). The result itself is neither copied nor
        bounded (only what the evaluation built is): `evaluate` is the safe form."""
        interpreter = BoundedInterpreter(EvaluationBudget() if budget is None else budget)
        try:
            return interpreter.visit(self.parsed.parsed, dict(scope))
        except jmespath.exceptions.JMESPathError as exc:
            raise ExpressionError(self.place, _one_line(str(exc))) from None
        except (ArithmeticError, ValueError) as exc:  # ceil(to_number('1e999')), NaN
            raise ExpressionError(
                self.place, f"`{self.source}` cannot be computed: {_one_line(str(exc))}"
            ) from None
        except LimitExceeded as exc:
            raise ExpressionLimitError(
                self.place, exc.limit, exc.bound, exc.node, self.source
            ) from None


@dataclass(frozen=True, slots=True, eq=False)
class Template:
    """A compiled template: literals, expressions, and objects and arrays of templates."""

    place: str
    tree: Any  # a literal, an Expression, or a dict / list of trees
    expressions: tuple[Expression, ...]

    @property
    def is_literal(self) -> bool:
        return not self.expressions

    def evaluate(self, scope: Mapping[str, Any], budget: EvaluationBudget | None = None) -> Any:
        """The template's value: every expression evaluated over ``scope``, all spending
        one ``budget`` (a fresh one unless given); a fresh copy, literals included (see
        `Expression.evaluate` for the failures)."""
        budget = EvaluationBudget() if budget is None else budget
        source = self.tree.source if isinstance(self.tree, Expression) else ""
        return _checked_copy(_evaluate(self.tree, scope, budget), self.place, budget, source)


def _evaluate(tree: Any, scope: Mapping[str, Any], budget: EvaluationBudget) -> Any:
    if isinstance(tree, Expression):
        return tree.search(scope, budget)  # the template copies and bounds the whole once
    if isinstance(tree, _Object):
        return {key: _evaluate(item, scope, budget) for key, item in tree.items.items()}
    if isinstance(tree, _Array):
        return [_evaluate(item, scope, budget) for item in tree.items]
    return tree  # a literal: JSON scalars, or containers without expressions


@dataclass(frozen=True, slots=True)
class _Object:
    items: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Array:
    items: list[Any]


def _checked_copy(value: Any, place: str, budget: EvaluationBudget, source: str) -> Any:
    """A structural copy of a JSON result (so no result ever aliases the scope it was
    read from), refusing non-finite numbers, and more than `MAX_RESULT_VALUES` values or
    `MAX_VALUE_BYTES` bytes of text (`ExpressionLimitError` at "the result"); the copy is
    charged to ``budget``. Iterative: a result may nest as deep as the expression that
    built it."""
    count = text = 0

    def over(limit: str, bound: int) -> ExpressionLimitError:
        return ExpressionLimitError(place, limit, bound, "the result", source)

    def leaf(item: Any) -> Any:
        nonlocal count, text
        count += 1
        if count > MAX_RESULT_VALUES:
            raise over("values", MAX_RESULT_VALUES)
        if isinstance(item, str):
            text += text_bytes(item)
            if text > MAX_VALUE_BYTES:
                raise over("bytes", MAX_VALUE_BYTES)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ExpressionError(place, f"the result holds {item}, which JSON cannot represent")
        elif isinstance(item, dict):
            return {}
        elif isinstance(item, list):
            return []
        return item

    root = leaf(value)
    pending: list[tuple[Any, Any]] = [(value, root)]
    while pending:
        original, target = pending.pop()
        if isinstance(original, dict):
            for key, item in original.items():
                text += text_bytes(key)
                target[key] = copied = leaf(item)
                if isinstance(copied, dict | list):
                    pending.append((item, copied))
        elif isinstance(original, list):
            for item in original:
                copied = leaf(item)
                target.append(copied)
                if isinstance(copied, dict | list):
                    pending.append((item, copied))
    try:
        budget.charge_size(count, text, "the result")
    except LimitExceeded as exc:
        raise over(exc.limit, exc.bound) from None
    return root


def _one_line(text: str) -> str:
    return " ".join(text.split())


# -- compiling ---------------------------------------------------------------------------


def compile_template(
    value: Any,
    path: tuple[str | int, ...],
    roots: frozenset[str],
    issues: list[ArtifactIssue],
) -> Template | None:
    """Compile ``value`` (JSON data) as a template at ``path`` whose expressions may read
    ``roots``; append every problem to ``issues`` and return ``None`` if there was any."""
    before = len(issues)
    found: list[Expression] = []
    tree = _tree(value, path, roots, issues, found)
    if len(issues) > before:
        return None
    return Template(place_of(*path), tree, tuple(found))


def compile_condition(
    value: Any,
    path: tuple[str | int, ...],
    roots: frozenset[str],
    issues: list[ArtifactIssue],
) -> Expression | None:
    """Compile a condition: it must be one whole ``${ ... }`` expression."""
    if not is_expression(value):
        issues.append(
            ArtifactIssue(
                place_of(*path),
                "not_an_expression",
                "a condition must be one `${ ... }` expression",
                "for example `${ state.score > `0.5` }`",
            )
        )
        return None
    return _expression(value, path, roots, issues)


def _tree(
    value: Any,
    path: tuple[str | int, ...],
    roots: frozenset[str],
    issues: list[ArtifactIssue],
    found: list[Expression],
) -> Any:
    if isinstance(value, str):
        if is_expression(value):
            expression = _expression(value, path, roots, issues)
            if expression is not None:
                found.append(expression)
            return expression
        if "${" in value:
            issues.append(
                ArtifactIssue(
                    place_of(*path),
                    "partial_expression",
                    "`${` inside a string is not interpolated: an expression must be the whole "
                    "string",
                    "write `${ join('', ['Hello ', input.name]) }`, or a raw string "
                    "`${ '${text}' }` for literal text",
                )
            )
        return value
    if isinstance(value, dict):
        before = len(found)
        items = {
            key: _tree(item, (*path, key), roots, issues, found) for key, item in value.items()
        }
        return _Object(items) if len(found) > before else value
    if isinstance(value, list):
        before = len(found)
        elements = [_tree(item, (*path, i), roots, issues, found) for i, item in enumerate(value)]
        return _Array(elements) if len(found) > before else value
    return value


def _expression(
    text: str,
    path: tuple[str | int, ...],
    roots: frozenset[str],
    issues: list[ArtifactIssue],
) -> Expression | None:
    place = place_of(*path)
    match = _WHOLE.fullmatch(text)
    assert match is not None
    source = match.group(1).strip()
    if not source:
        issues.append(ArtifactIssue(place, "expression_syntax", "the expression is empty"))
        return None
    if len(source) > MAX_EXPRESSION_CHARS:
        issues.append(
            ArtifactIssue(
                place,
                "expression_too_long",
                f"the expression is {len(source)} characters; the limit is {MAX_EXPRESSION_CHARS}",
                "split the work over several `set` nodes",
            )
        )
        return None
    try:
        parsed = jmespath.compile(source)
    except jmespath.exceptions.LexerError as exc:
        issues.append(_syntax(place, exc.lex_position, exc.message, source))
        return None
    except jmespath.exceptions.IncompleteExpressionError as exc:
        issues.append(_syntax(place, exc.lex_position, "the expression ends too early", source))
        return None
    except jmespath.exceptions.ParseError as exc:
        issues.append(_syntax(place, exc.lex_position, exc.msg, source))
        return None
    except (jmespath.exceptions.JMESPathError, ValueError, RecursionError) as exc:
        issues.append(ArtifactIssue(place, "expression_syntax", _one_line(str(exc))))
        return None
    before = len(issues)
    tree = cast(dict[str, Any], parsed.parsed)
    _check_functions(tree, place, issues)
    references = tuple(_references(tree))
    for chain in references:
        if chain[0] not in roots:
            allowed = ", ".join(name for name in SCOPE_NAMES if name in roots)
            unavailable = chain[0] in SCOPE_NAMES
            issues.append(
                ArtifactIssue(
                    place,
                    "not_in_scope",
                    f"`{chain[0]}` is not available here"
                    if unavailable
                    else f"`{chain[0]}` is not a name in scope",
                    f"an expression here reads {allowed}",
                )
            )
    if len(issues) > before:
        return None
    return Expression(place, source, parsed, references)


def _syntax(place: str, position: object, message: object, source: str) -> ArtifactIssue:
    column = f" at column {position + 1}" if isinstance(position, int) else ""
    return ArtifactIssue(
        place,
        "expression_syntax",
        f"invalid JMESPath{column} of `{source}`: {_one_line(str(message))}",
        "see https://jmespath.org/specification.html",
    )


def _check_functions(node: dict[str, Any], place: str, issues: list[ArtifactIssue]) -> None:
    pending = [(node, False)]
    while pending:
        current, expref_allowed = pending.pop()
        kind = current.get("type")
        children = current.get("children", [])
        if kind == "expref" and not expref_allowed:
            issues.append(
                ArtifactIssue(
                    place,
                    "expression_function",
                    "`&expression` is only an argument of sort_by, max_by, min_by or map",
                )
            )
        if kind == "function_expression":
            name = current.get("value")
            entry = _FUNCTIONS.get(name) if isinstance(name, str) else None
            if entry is None:
                issues.append(
                    ArtifactIssue(
                        place,
                        "expression_function",
                        f"unknown function {name}()",
                        "the JMESPath functions are " + ", ".join(sorted(_FUNCTIONS)),
                    )
                )
            else:
                signature = entry["signature"]
                variadic = bool(signature) and bool(signature[-1].get("variadic"))
                count = len(children)
                if (count < len(signature)) if variadic else (count != len(signature)):
                    wanted = f"at least {len(signature)}" if variadic else str(len(signature))
                    issues.append(
                        ArtifactIssue(
                            place,
                            "expression_function",
                            f"{name}() takes {wanted} argument(s), not {count}",
                        )
                    )
                for index, child in enumerate(children):
                    spec = signature[min(index, len(signature) - 1)] if signature else {}
                    pending.append((child, "expref" in spec.get("types", ())))
            continue
        pending.extend((child, False) for child in children if isinstance(child, dict))


def _references(node: dict[str, Any]) -> Iterator[tuple[str, ...]]:
    """The field chains read from the root value (the scope)."""
    pending: list[tuple[dict[str, Any], bool]] = [(node, True)]
    while pending:
        current, at_root = pending.pop()
        kind = current.get("type")
        children = [child for child in current.get("children", []) if isinstance(child, dict)]
        if kind == "field":
            if at_root:
                yield (str(current.get("value")),)
            continue
        if kind == "subexpression" and at_root and children and children[0].get("type") == "field":
            chain = [str(children[0].get("value"))]
            for child in children[1:]:
                if child.get("type") == "field":
                    chain.append(str(child.get("value")))
                    continue
                if child.get("type") in _FIRST_SAME:  # e.g. `items[0]`, `items[*]`
                    first = child.get("children", [{}])[0]
                    if isinstance(first, dict) and first.get("type") == "field":
                        chain.append(str(first.get("value")))
                break
            yield tuple(chain)
            pending.extend((child, False) for child in children[1:])
            continue
        if kind in _FIRST_SAME:
            if children:
                pending.append((children[0], at_root))
                pending.extend((child, False) for child in children[1:])
        elif kind in _ALL_SAME:
            pending.extend((child, at_root) for child in children)
        else:  # expref, literals, indexes, slices, @: nothing read from here
            pending.extend((child, False) for child in children)
