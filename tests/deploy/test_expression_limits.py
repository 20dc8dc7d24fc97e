"""Bounded evaluation of expressions (docs/deploy.md, "Limits"): work and the size of
every value built are counted as the evaluation goes; past a bound it stops with an
`ExpressionLimitError` naming the place, the node and the limit. A doubling chain is
stopped at the first value over the bound (shown by the evaluation's own accounting
and by the memory it allocated, never by time), and legitimate expressions evaluate to
what jmespath gives."""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path
from typing import Any

import jmespath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowledger.deploy import ExpressionError, ExpressionLimitError
from flowledger.deploy.artifacts.budget import EvaluationBudget
from flowledger.deploy.artifacts.errors import ArtifactIssue
from flowledger.deploy.artifacts.expressions import SCOPE_NAMES, Template, compile_template
from flowledger.deploy.artifacts.json_text import json_text_length
from flowledger.deploy.artifacts.limits import (
    MAX_BUILT_VALUES,
    MAX_EVALUATION_STEPS,
    MAX_RESULT_VALUES,
    MAX_VALUE_BYTES,
)

REPO = Path(__file__).resolve().parents[2]
ROOTS = frozenset({*SCOPE_NAMES, "item", "index", "error"})  # foreach bodies, on_error
PLACE = ("nodes", "n", "assign", "x")


def template(value: Any) -> Template:
    issues: list[ArtifactIssue] = []
    compiled = compile_template(value, PLACE, ROOTS, issues)
    assert compiled is not None, issues
    return compiled


def refused(value: Any, scope: dict[str, Any]) -> tuple[ExpressionLimitError, EvaluationBudget]:
    budget = EvaluationBudget()
    with pytest.raises(ExpressionLimitError) as caught:
        template(value).evaluate(scope, budget)
    return caught.value, budget


# -- doubling chains -----------------------------------------------------------------------

CHAINS = {
    # each level joins the string to itself: 2**levels characters
    "join": ("input.s{}", " | join('', [@, @])", "bytes"),
    # each level writes a list of two copies as JSON text (escapes grow it further)
    "to_string": ("input.s{}", " | to_string([@, @])", "bytes"),
    # each level is a list holding the last one twice: 2**levels leaves as JSON text,
    # which the unbounded interpreter's to_string wrote out (the 157-character report)
    "list": ("input.s{} | to_string(@)", " | [@, @]", "values"),
}


@pytest.mark.parametrize("levels", [22, 30, 64])
@pytest.mark.parametrize("form", sorted(CHAINS))
def test_a_doubling_chain_is_refused_at_the_first_value_over_the_bound(
    form: str, levels: int
) -> None:
    shape, level, limit = CHAINS[form]
    source = shape.format(level * levels)
    if form == "list":  # a DAG of two pointers a level: its accounting tells it all
        error, budget = refused(f"${{ {source} }}", {"input": {"s": "x"}})
        peak = 0
    else:  # the text forms: what was allocated, too
        tracemalloc.start()
        try:
            error, budget = refused(f"${{ {source} }}", {"input": {"s": "x"}})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert error.code == "expression_limit"
    assert error.place == "nodes.n.assign.x"
    assert error.limit == limit
    assert error.bound == {"bytes": MAX_VALUE_BYTES, "values": MAX_BUILT_VALUES}[limit]
    assert error.expression == source
    # Refused where the doubled value would first exist: a list of two references, or
    # the string to_string would write (it is sized before it is built).
    assert error.node in ("a multi-select list `[...]`", "to_string()")
    assert f"evaluation stopped at {error.node}" in str(error)
    # The evaluation's own accounting: no string over the bound was ever built, and the
    # work done is that of reaching the bound, whatever the number of levels.
    assert budget.longest_string <= MAX_VALUE_BYTES
    assert budget.steps < MAX_EVALUATION_STEPS // 2
    assert peak < 4 * MAX_VALUE_BYTES
    if form == "list":
        assert budget.longest_string == 1  # to_string never ran: only "x" was measured


def test_work_is_bounded_even_when_no_value_grows() -> None:
    """Seven nested ten-way filters visit 10**7 nodes and build only empty lists."""
    source = "`true`"
    for _ in range(7):
        source = f"[@, @, @, @, @, @, @, @, @, @][?{source}]"
    error, budget = refused(f"${{ input | {source} }}", {"input": 1})
    assert (error.limit, error.bound) == ("steps", MAX_EVALUATION_STEPS)
    assert budget.steps == MAX_EVALUATION_STEPS + 1
    assert "more than 1,000,000 steps" in str(error)


# -- every building node -------------------------------------------------------------------

HALF = [0] * (MAX_BUILT_VALUES // 2)  # two of them (and their lists) are over the bound
BUILDERS = [
    ("${ input.halves[*] }", "a projection"),
    ("${ input.halves[] }", "a flatten `[]`"),
    ("${ input.halves[?@] }", "a filter projection `[?...]`"),
    ("${ input.by_key.* }", "an object projection `*`"),
    ("${ input.big[1:] }", "a slice"),
    ("${ [input.halves[0], input.halves[1]] }", "a multi-select list `[...]`"),
    ("${ {a: input.halves[0], b: input.halves[1]} }", "a multi-select hash `{...}`"),
    ("${ map(&@, input.halves) }", "map()"),
    ("${ sort(input.big) }", "sort()"),
    ("${ values(input.by_key) }", "values()"),
    ("${ merge(input.by_key, input.by_key2) }", "merge()"),
]
BUILDER_SCOPE = {
    "input": {
        "big": [0] * (MAX_BUILT_VALUES + 1),
        "halves": [HALF, HALF],
        "by_key": {"a": HALF, "b": HALF},
        "by_key2": {"c": HALF},
    }
}


@pytest.mark.parametrize(("value", "node"), BUILDERS)
def test_every_node_that_builds_a_value_is_bounded(value: str, node: str) -> None:
    error, _ = refused(value, BUILDER_SCOPE)
    assert (error.limit, error.node) == ("values", node)


def test_join_refuses_before_building_its_string() -> None:
    scope = {"input": {"sep": "-" * (64 << 10), "parts": ["a"] * 100}}
    error, budget = refused("${ join(input.sep, input.parts) }", scope)
    assert (error.limit, error.node) == ("bytes", "join()")
    assert budget.longest_string == 0  # nothing measured: the 6.4 MB text was never made


def test_to_string_refuses_before_building_its_escaped_text() -> None:
    quotes = '"' * (MAX_VALUE_BYTES * 3 // 4)  # under the bound; escaped, over it
    error, budget = refused("${ to_string([input.q]) }", {"input": {"q": quotes}})
    assert (error.limit, error.node) == ("bytes", "to_string()")
    assert budget.longest_string == len(quotes)  # measured in the list; never the text


def test_a_projection_is_refused_at_its_first_member_over_the_bound() -> None:
    items = ["y" * (MAX_VALUE_BYTES // 5)] * 8  # each doubled is 2/5 of the bound
    error, budget = refused("${ input.items[*].join('', [@, @]) }", {"input": {"items": items}})
    assert (error.limit, error.node) == ("bytes", "a projection")
    assert budget.longest_string == 2 * len(items[0])


def test_the_result_is_bounded_in_values_and_text() -> None:
    at_bound = "z" * MAX_VALUE_BYTES
    assert template("${ input.t }").evaluate({"input": {"t": at_bound}}) == at_bound
    error, _ = refused("${ input.t }", {"input": {"t": at_bound + "z"}})
    assert (error.limit, error.node, error.expression) == ("bytes", "the result", "input.t")
    error, _ = refused({"k": "${ input.t }"}, {"input": {"t": at_bound}})  # the key counts
    assert (error.limit, error.node, error.expression) == ("bytes", "the result", "")
    many = [0] * MAX_RESULT_VALUES  # with its list, one value over the bound
    error, _ = refused("${ input.many }", {"input": {"many": many}})
    assert (error.limit, error.bound, error.node) == ("values", MAX_RESULT_VALUES, "the result")
    assert template("${ input.many[1:] }").evaluate({"input": {"many": many}}) == many[1:]


def test_one_budget_covers_all_the_expressions_of_a_template() -> None:
    third = "w" * (MAX_VALUE_BYTES // 3)
    value = {"a": "${ join('', [input.t, '']) }", "b": "${ join('', [input.t, '']) }"}
    scope = {"input": {"t": third}}
    assert template(value).evaluate(scope) == {"a": third, "b": third}
    error, _ = refused({**value, "c": "${ input.t }", "d": "${ input.t }"}, scope)
    assert (error.limit, error.node) == ("bytes", "the result")
    # Work: the expression alone is within the bound; enough copies of it are not.
    heavy = "${ input.rows[*].[@, @, @] | length(@) }"
    rows = {"input": {"rows": list(range(10_000))}}
    alone = EvaluationBudget()
    assert template(heavy).evaluate(rows, alone) == 10_000
    assert alone.steps < MAX_EVALUATION_STEPS // 4
    error, _ = refused([heavy] * (MAX_EVALUATION_STEPS // alone.steps + 1), rows)
    assert error.limit == "steps"


def test_the_limit_error_is_an_expression_error_with_a_stable_code() -> None:
    error, _ = refused("${ input.s | [@, @] | [@, @] | [@, @] }", {"input": {"s": HALF}})
    assert isinstance(error, ExpressionError)
    assert error.code == "expression_limit"
    assert error.hint
    assert str(error).startswith(
        "nodes.n.assign.x: evaluation stopped at a multi-select list `[...]` of "
        "`input.s | [@, @] | [@, @] | [@, @]`: a value would hold more than 1,000,000 JSON values"
    )


# -- legitimate expressions ----------------------------------------------------------------

SCOPE: dict[str, Any] = {
    "input": {
        "text": "Quarterly note",
        "city": "Lyon",
        "a": 2,
        "b": 3,
        "review": True,
        "tool": "append_line",
        "summary": "all good",
        "name": "Ada",
        "days": 3,
        "count": 4,
        "names": ["b", "a"],
    },
    "state": {
        "answer": {"approved": True, "comment": "fine"},
        "sections": ["Weather: sunny", "News: calm"],
        "briefing": "Weather: sunny | News: calm",
        "approved": True,
        "go": True,
        "notes": ["one", "two"],
        "label": "one",
        "digest": "ab12",
        "score": 0.7,
        "items": [{"name": "n", "age": 3, "price": 5}],
        "limit": 4,
    },
    "result": {
        "text": "sunny",
        "structured": {"titles": ["calm", "quiet"], "datetime": "2026-01-01T00:00:00"},
        "output": {"approved": True},
    },
    "resume": {"go": True, "approved": False},
    "item": {"email": "ada@example.org", "name": "Ada"},
    "index": 2,
    "error": {"kind": "tool_error", "message": "refused", "code": "tool_error"},
}
EXPRESSION = re.compile(r'"(\$\{.*?\})"|`(\$\{[^`]*?\})`')


def documented_expressions() -> list[str]:
    """Every ``${ ... }`` of the artifacts in tests/deploy and of docs/deploy.md."""
    files = [*sorted((REPO / "tests" / "deploy").rglob("*.yaml")), REPO / "docs" / "deploy.md"]
    found: dict[str, None] = {}
    for path in files:
        if "node_modules" in path.parts:
            continue
        for match in EXPRESSION.finditer(path.read_text()):
            text = match.group(1) or match.group(2)
            if text != "${ ... }" and "<" not in text:  # the prose's placeholders
                found[text] = None
    return list(found)


def test_every_documented_expression_evaluates_as_jmespath_does() -> None:
    expressions = documented_expressions()
    assert len(expressions) >= 25  # the collection found the documents' expressions
    for text in expressions:
        compiled = template(text)
        (expression,) = compiled.expressions
        expected = jmespath.search(expression.source, SCOPE)
        assert compiled.evaluate(SCOPE) == expected, text


ITEMS = [{"name": f"item {i}", "price": i % 97, "tags": ["a", "b"]} for i in range(20_000)]
LARGE_BUT_LEGITIMATE = [
    "${ input.items[?price > `50`].{name: name, price: price} }",
    "${ sort_by(input.items, &price)[:100].name }",
    "${ max_by(input.items, &price).name }",
    "${ length(input.items[].tags[]) }",
    "${ join(', ', input.items[:2000].name) }",
    "${ to_string(input.items[:500]) }",
    "${ map(&length(tags), input.items) }",
    "${ sum(input.items[*].price) }",
]


@pytest.mark.parametrize("text", LARGE_BUT_LEGITIMATE)
def test_large_but_legitimate_expressions_are_within_the_limits(text: str) -> None:
    scope = {"input": {"items": ITEMS}}
    compiled = template(text)
    assert compiled.evaluate(scope) == jmespath.search(compiled.expressions[0].source, scope)


# -- sizing to_string's text ---------------------------------------------------------------

TRICKY = st.text(
    st.sampled_from(
        [
            "a",
            " ",
            '"',
            "\\",
            "\n",
            "\t",
            "\x00",
            "\x1f",
            "\x7f",
            "é",
            "\u2028",
            "\ud800",
            "\U0001f600",
            "\u00a0",
        ]
    )
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | TRICKY,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(TRICKY, children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_json_text_length_is_the_length_to_string_writes(value: Any) -> None:
    written = json.dumps(value, separators=(",", ":"), default=str)
    assert json_text_length(value, 10**9)[1] == len(written)
    assert json_text_length(value, len(written))[1] == len(written)
    if written:
        assert json_text_length(value, len(written) - 1)[1] > len(written) - 1
