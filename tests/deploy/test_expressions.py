"""Templates and expressions: JMESPath compiled once, values keep their types, evaluation
failures are typed and placed."""

from __future__ import annotations

from typing import Any

import pytest

from flowledger.deploy import ExpressionError, truthy
from flowledger.deploy.artifacts.errors import ArtifactIssue
from flowledger.deploy.artifacts.expressions import compile_condition, compile_template
from flowledger.deploy.artifacts.limits import MAX_RESULT_VALUES

ROOTS = frozenset({"input", "state", "result"})
SCOPE = {"input": {"n": 3, "names": ["b", "a"]}, "state": {"ok": True}, "result": {"x": None}}


def template(value: Any) -> Any:
    issues: list[ArtifactIssue] = []
    compiled = compile_template(value, ("nodes", "t", "output"), ROOTS, issues)
    assert compiled is not None, issues
    return compiled


def test_an_expression_keeps_its_type() -> None:
    assert template("${ input.n }").evaluate(SCOPE) == 3
    assert template("${input.names}").evaluate(SCOPE) == ["b", "a"]
    assert template("${ sort(input.names) }").evaluate(SCOPE) == ["a", "b"]
    assert template("${ state }").evaluate(SCOPE) == {"ok": True}
    assert template("${ result.x }").evaluate(SCOPE) is None


def test_objects_and_arrays_are_templates_and_keys_are_literal() -> None:
    compiled = template({"${ not }": ["${ input.n }", "n", {"deep": "${ state.ok }"}], "k": 1})
    assert compiled.evaluate(SCOPE) == {"${ not }": [3, "n", {"deep": True}], "k": 1}
    assert len(compiled.expressions) == 2
    literal = template({"a": [1, "two", None]})
    assert literal.is_literal and literal.evaluate(SCOPE) == {"a": [1, "two", None]}


def test_a_raw_string_writes_literal_dollar_braces() -> None:
    assert template("${ '${not evaluated}' }").evaluate(SCOPE) == "${not evaluated}"


def test_results_share_nothing_with_the_scope_or_each_other() -> None:
    compiled = template({"names": "${ input.names }", "fixed": [1, {"a": 2}]})
    first = compiled.evaluate(SCOPE)
    second = compiled.evaluate(SCOPE)
    assert first == second == {"names": ["b", "a"], "fixed": [1, {"a": 2}]}
    first["names"].append("c")
    first["fixed"][1]["a"] = 3
    assert second == {"names": ["b", "a"], "fixed": [1, {"a": 2}]}
    assert SCOPE["input"]["names"] == ["b", "a"]
    assert compiled.evaluate(SCOPE)["fixed"] == [1, {"a": 2}]
    whole = template("${ input }").evaluate(SCOPE)
    whole["n"] = 4
    assert SCOPE["input"]["n"] == 3


def test_deeply_nested_results_are_copied_without_recursion() -> None:
    deep: object = 1
    for _ in range(5000):
        deep = [deep]
    result = template("${ input.deep }").evaluate({"input": {"deep": deep}})
    depth = 0
    while isinstance(result, list):
        assert result is not deep
        (result,), (deep,) = result, deep  # type: ignore[misc]
        depth += 1
    assert (depth, result) == (5000, 1)


def test_evaluation_failures_are_typed_and_placed() -> None:
    with pytest.raises(ExpressionError) as caught:
        template("${ length(result.x) }").evaluate(SCOPE)
    assert caught.value.place == "nodes.t.output"
    assert caught.value.code == "expression_failed"
    with pytest.raises(ExpressionError, match="cannot represent"):
        template("${ sum(input.big) }").evaluate({"input": {"big": [1e308, 1e308]}})


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("ceil(to_number('1e999'))", "cannot convert float infinity to integer"),
        ("floor(to_number('nan'))", "cannot convert float NaN to integer"),
        ("floor(sum(input.big))", "cannot convert float infinity to integer"),
    ],
)
def test_numbers_out_of_range_are_expression_errors(source: str, reason: str) -> None:
    """Python's OverflowError and ValueError used to escape evaluation untyped."""
    with pytest.raises(ExpressionError) as caught:
        template(f"${{ {source} }}").evaluate({"input": {"big": [1e308, 1e308]}})
    assert caught.value.place == "nodes.t.output"
    assert caught.value.code == "expression_failed"
    assert str(caught.value).startswith(f"nodes.t.output: `{source}` cannot be computed: {reason}")


def test_results_are_bounded() -> None:
    many = list(range(MAX_RESULT_VALUES))
    with pytest.raises(ExpressionError, match="more than"):
        template("${ input.many }").evaluate({"input": {"many": many}})


def test_conditions_use_jmespath_truth() -> None:
    issues: list[ArtifactIssue] = []
    condition = compile_condition("${ input.n > `2` }", ("c",), ROOTS, issues)
    assert condition is not None and truthy(condition.evaluate(SCOPE))
    for value, expected in [
        (0, True),
        ("", False),
        ([], False),
        ({}, False),
        (None, False),
        (False, False),
        ("x", True),
        ([0], True),
    ]:
        assert truthy(value) is expected, value


def test_references_are_the_chains_read_from_the_scope() -> None:
    compiled = template("${ input.names[0] || state.ok.deep | length(@) }")
    (expression,) = compiled.expressions
    assert set(expression.references) == {("input", "names"), ("state", "ok", "deep")}
    projected = template("${ input.items[*].name }").expressions[0]
    assert projected.references == (("input", "items"),)
    sorted_ = template("${ sort_by(input.items, &age) }").expressions[0]
    assert sorted_.references == (("input", "items"),)
    filtered = template("${ input.items[?price > state.limit] }").expressions[0]
    assert filtered.references == (("input", "items"),)
