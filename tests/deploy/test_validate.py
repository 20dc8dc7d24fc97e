"""Validating artifacts: the examples pass; every bad artifact gets typed issues that name
their places, all of them at once; the canonical form is stable."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowledger.deploy import (
    Artifact,
    ArtifactValidationError,
    load_artifact,
    read_document,
    validate_artifact,
)
from flowledger.deploy.artifacts.errors import MAX_ISSUES
from flowledger.deploy.artifacts.limits import MAX_EXPRESSION_CHARS, MAX_EXPRESSIONS, MAX_NODES

from .conftest import APPROVAL, BRIEFING, approval_data, briefing_data, minimal

# A place: identifiers joined by dots, indexes in brackets, odd keys quoted; or `$`.
_QUOTED = r'\["(?:[^"\\]|\\.)*"\]'
PLACE = re.compile(rf"\$|(?:[A-Za-z_]\w*|{_QUOTED}|\[\d+\])(?:\.[A-Za-z_]\w*|\[\d+\]|{_QUOTED})*")


def refused(document: Any) -> list[tuple[str, str]]:
    with pytest.raises(ArtifactValidationError) as caught:
        validate_artifact(document)
    error = caught.value
    for issue in error.issues:
        assert PLACE.fullmatch(issue.place), issue.place
        assert issue.code and issue.message
    assert error.place == error.issues[0].place
    return [(issue.place, issue.code) for issue in error.issues]


def test_the_examples_are_valid() -> None:
    approval = load_artifact(APPROVAL)
    briefing = load_artifact(BRIEFING)
    assert (approval.name, approval.version) == ("approval", "1.0.0")
    assert briefing.branches == {"gather": (frozenset({"forecast"}), frozenset({"headlines"}))}
    assert set(briefing.schemas) == {"input_schema", "output_schema"}
    assert "nodes.ask.resume_schema" in approval.schemas
    assert briefing.initial_state() == {"sections": [], "briefing": None, "approved": None}
    assert briefing.successors("gather") == ("forecast", "headlines")
    assert briefing.successors("decide") == ("publish", "rejected")
    assert "nodes.decide.cases[0].when" in briefing.conditions


def test_yaml_and_json_give_the_same_canonical_bytes() -> None:
    from_yaml = load_artifact(BRIEFING)
    from_json = load_artifact(json.dumps(read_document(BRIEFING), indent=2), format="json")
    assert from_yaml.canonical == from_json.canonical
    assert from_yaml.digest == from_json.digest
    # Defaults written out or left out mean the same artifact.
    data = briefing_data()
    data["nodes"]["headlines"]["timeout"] = 60
    data["description"] = data["description"]
    data["nodes"]["compose"]["label"] = None
    assert validate_artifact(data).digest == from_yaml.digest
    again = load_artifact(from_yaml.canonical, format="json")
    assert again.canonical == from_yaml.canonical


def test_a_model_validates_like_its_data() -> None:
    model = Artifact.model_validate(briefing_data())
    assert validate_artifact(model).digest == load_artifact(BRIEFING).digest
    end = {"kind": "end", "outcome": "ok", "output": {"a": float("nan")}}
    built = Artifact.model_validate(minimal(nodes={"done": end}))
    assert refused(built) == [("nodes.done.output.a", "not_finite")]


def test_every_structure_problem_is_reported_at_once() -> None:
    data = briefing_data()
    del data["start"]
    data["version"] = "Not A Version"
    data["nodes"]["forecast"]["timeot"] = 5
    data["nodes"]["headlines"]["kind"] = "call"
    data["nodes"]["compose"].pop("next")
    data["nodes"]["Bad-Id"] = {"kind": "end", "outcome": "ok"}
    found = refused(data)
    assert ("start", "field_missing") in found
    assert ("version", "bad_name") in found
    assert ("nodes.forecast.timeot", "field_unknown") in found
    assert ("nodes.headlines", "bad_kind") in found
    assert ("nodes.compose.next", "field_missing") in found
    assert ('nodes["Bad-Id"]', "bad_key") in found


def test_a_union_gets_one_issue_at_its_place() -> None:
    data = briefing_data()
    data["nodes"]["forecast"]["arguments"] = [1]
    data["nodes"]["compose"]["assign"] = {"Bad": 1}
    found = refused(data)
    assert found.count(("nodes.forecast.arguments", "bad_value")) == 1
    assert ("nodes.compose.assign.Bad", "bad_key") in found


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split("/")
    target: Any = data
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value


# (change: path -> new value, expected place, expected code), on the briefing example.
BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"start": "nowhere"}, "start", "unknown_node"),
    ({"nodes/compose/next": "nowhere"}, "nodes.compose.next", "unknown_node"),
    ({"nodes/decide/cases/0/next": "nowhere"}, "nodes.decide.cases[0].next", "unknown_node"),
    ({"nodes/decide/default": "nowhere"}, "nodes.decide.default", "unknown_node"),
    ({"nodes/gather/join": "nowhere"}, "nodes.gather.join", "unknown_node"),
    (
        {"nodes/decide/cases/0/when": "${ state.approved == }"},
        "nodes.decide.cases[0].when",
        "expression_syntax",
    ),
    (
        {"nodes/decide/cases/0/when": "state.approved"},
        "nodes.decide.cases[0].when",
        "not_an_expression",
    ),
    ({"nodes/decide/cases/0/when": "${ result.x }"}, "nodes.decide.cases[0].when", "not_in_scope"),
    (
        {"nodes/decide/cases/0/when": "${ stat.approved }"},
        "nodes.decide.cases[0].when",
        "not_in_scope",
    ),
    (
        {"nodes/decide/cases/0/when": "${ state.aproved }"},
        "nodes.decide.cases[0].when",
        "unknown_field",
    ),
    (
        {"nodes/decide/cases/0/when": "${ resume.approved }"},
        "nodes.decide.cases[0].when",
        "not_in_scope",
    ),
    (
        {"nodes/decide/cases/0/when": "${ nope(state.approved) }"},
        "nodes.decide.cases[0].when",
        "expression_function",
    ),
    (
        {"nodes/decide/cases/0/when": "${ length(state.approved, `1`) }"},
        "nodes.decide.cases[0].when",
        "expression_function",
    ),
    (
        {"nodes/decide/cases/0/when": "${ &state.approved }"},
        "nodes.decide.cases[0].when",
        "expression_function",
    ),
    (
        {"nodes/decide/cases/0/when": "${ " + "a" * (MAX_EXPRESSION_CHARS + 1) + " }"},
        "nodes.decide.cases[0].when",
        "expression_too_long",
    ),
    ({"nodes/decide/cases/0/when": "${}"}, "nodes.decide.cases[0].when", "expression_syntax"),
    (
        {"nodes/forecast/arguments/city": "Weather in ${ input.city }"},
        "nodes.forecast.arguments.city",
        "partial_expression",
    ),
    ({"nodes/forecast/arguments": "input.city"}, "nodes.forecast.arguments", "not_a_template"),
    (
        {"nodes/forecast/arguments/city": "${ input.town }"},
        "nodes.forecast.arguments.city",
        "unknown_field",
    ),
    (
        {"nodes/forecast/assign/sections": "${ [result.txt] }"},
        "nodes.forecast.assign.sections",
        "unknown_field",
    ),
    (
        {"nodes/review/assign/approved": "${ result.out }"},
        "nodes.review.assign.approved",
        "unknown_field",
    ),
    ({"nodes/forecast/dependency": "sky"}, "nodes.forecast.dependency", "unknown_dependency"),
    ({"nodes/forecast/tool": "get_weather"}, "nodes.forecast.tool", "unknown_tool"),
    (
        {"dependencies/weather/tools": ["get_forecast", "get_alerts"]},
        "dependencies.weather.tools[1]",
        "unused_tool",
    ),
    (
        {"dependencies/weather/tools": ["get_forecast", "get_forecast"]},
        "dependencies.weather.tools[1]",
        "duplicate",
    ),
    ({"nodes/review/workflow": "other_child"}, "nodes.review.workflow", "unknown_child"),
    ({"children/spare": "2"}, "children.spare", "unused_child"),
    ({"nodes/compose/assign/summary": "x"}, "nodes.compose.assign.summary", "unknown_state_field"),
    ({"state/sections/reduce": "replace"}, "nodes.gather.branches[1]", "conflicting_writes"),
    ({"state/sections/initial": {}}, "state.sections.initial", "bad_initial"),
    ({"state/briefing/initial": "${ input.city }"}, "state.briefing.initial", "not_a_template"),
    ({"input_schema/additionalProperties": True}, "input_schema", "invalid_schema"),
    ({"output_schema/properties/city": {"type": "object"}}, "output_schema", "invalid_schema"),
    ({"nodes/publish/output/extra": 1}, "nodes.publish.output.extra", "unknown_field"),
    (
        {"nodes/publish/output": {"city": "x", "briefing": "${ state.briefing }"}},
        "nodes.publish.output",
        "field_missing",
    ),
    (
        {"nodes/publish/output": {"city": 1, "briefing": "b", "approved": True}},
        "nodes.publish.output",
        "output_invalid",
    ),
    ({"nodes/headlines/next": "forecast"}, "nodes.gather.branches[1]", "shared_branch_node"),
    ({"nodes/headlines/next": "publish"}, "nodes.publish", "end_in_branch"),
    ({"nodes/headlines/next": "gather"}, "nodes.gather.branches[1]", "branch_loop"),
    ({"nodes/review/next": "forecast"}, "nodes.review.next", "into_branch"),
    ({"nodes/decide/default": "compose"}, "nodes.decide.default", "into_join"),
    ({"nodes/gather/join": "forecast"}, "nodes.gather.join", "bad_join"),
    ({"nodes/gather/branches": ["forecast", "forecast"]}, "nodes.gather.branches", "duplicate"),
    (
        {"nodes/rejected": {"kind": "set", "assign": {"approved": True}, "next": "rejected"}},
        "nodes.rejected",
        "no_way_to_end",
    ),
    ({"nodes/orphan": {"kind": "end", "outcome": "lost"}}, "nodes.orphan", "unreachable_node"),
    ({"nodes/compose/label": "two\nlines"}, "nodes.compose.label", "bad_label"),
    ({"nodes/compose/label": "é" * 40}, "nodes.compose.label", "too_long"),
    ({"description": "é" * 600}, "description", "too_long"),
    ({"nodes/forecast/timeout": 0}, "nodes.forecast.timeout", "bad_value"),
    ({"nodes/forecast/timeout": 3601}, "nodes.forecast.timeout", "bad_value"),
    ({"nodes/forecast/timeout": "5"}, "nodes.forecast.timeout", "bad_value"),
    ({"nodes/gather/branches": ["forecast"]}, "nodes.gather.branches", "bad_value"),
    ({"format": "flowledger.artifact/v2"}, "format", "bad_value"),
    ({"nodes/forecast/arguments/days": 2**60}, "nodes.forecast.arguments.days", "number_range"),
    (
        {"nodes/forecast/arguments/days": float("nan")},
        "nodes.forecast.arguments.days",
        "not_finite",
    ),
]


@pytest.mark.parametrize(("changes", "place", "code"), BAD, ids=[b[2] + ":" + b[1] for b in BAD])
def test_a_bad_artifact_names_the_place(changes: dict[str, Any], place: str, code: str) -> None:
    data = briefing_data()
    for path, value in changes.items():
        _set(data, path, value)
    assert (place, code) in refused(data)


def test_interrupt_scope_and_resume_fields() -> None:
    data = approval_data()
    data["nodes"]["ask"]["assign"]["answer"] = "${ resume.aproved }"
    assert ("nodes.ask.assign.answer", "unknown_field") in refused(data)
    data = approval_data()
    data["nodes"]["ask"]["request"]["text"] = "${ resume.approved }"
    assert ("nodes.ask.request.text", "not_in_scope") in refused(data)
    data = approval_data()
    data["nodes"]["ask"]["resume_schema"] = {"type": "object"}
    assert ("nodes.ask.resume_schema", "invalid_schema") in refused(data)


def test_no_end_node() -> None:
    found = refused(
        minimal(
            nodes={"done": {"kind": "set", "assign": {"x": 1}, "next": "done"}}, state={"x": {}}
        )
    )
    assert ("nodes", "no_end") in found


def test_nested_parallel_must_join_inside_its_branch() -> None:
    state = {"items": {"reduce": "append"}}
    write = {"items": "${ [`1`] }"}
    nodes = {
        "outer": {"kind": "parallel", "branches": ["a", "inner"], "join": "done"},
        "a": {"kind": "set", "assign": write, "next": "done"},
        "inner": {"kind": "parallel", "branches": ["b", "c"], "join": "done"},
        "b": {"kind": "set", "assign": write, "next": "done"},
        "c": {"kind": "set", "assign": write, "next": "done"},
        "done": {"kind": "end", "outcome": "ok"},
    }
    found = refused(minimal(start="outer", state=state, nodes=nodes))
    assert ("nodes.inner.join", "bad_join") in found
    # Joining inside the branch is fine.
    nodes["inner"]["join"] = "merge"
    nodes["b"]["next"] = nodes["c"]["next"] = "merge"
    nodes["merge"] = {"kind": "set", "assign": write, "next": "done"}
    nested = validate_artifact(minimal(start="outer", state=state, nodes=nodes))
    assert nested.branches["outer"][1] == frozenset({"inner", "b", "c", "merge"})


def test_parallel_branches_must_reach_their_own_join() -> None:
    state = {"items": {"reduce": "append"}}
    write = {"items": "${ [`1`] }"}
    nodes = {
        "one": {"kind": "parallel", "branches": ["a", "b"], "join": "merge"},
        "a": {"kind": "set", "assign": write, "next": "merge"},
        "b": {"kind": "end", "outcome": "early"},  # never reaches the join
        "merge": {"kind": "parallel", "branches": ["c", "d"], "join": "done"},
        "c": {"kind": "set", "assign": write, "next": "done"},
        "d": {"kind": "set", "assign": write, "next": "done"},
        "done": {"kind": "end", "outcome": "ok"},
    }
    found = refused(minimal(start="one", state=state, nodes=nodes))
    assert ("nodes.one.branches[1]", "branch_without_join") in found
    # two parallel nodes may not share one join node
    nodes["b"] = {"kind": "set", "assign": write, "next": "merge"}
    nodes["two"] = {"kind": "parallel", "branches": ["e", "f"], "join": "done"}
    nodes["e"] = {"kind": "set", "assign": write, "next": "done"}
    nodes["f"] = {"kind": "set", "assign": write, "next": "done"}
    nodes["c"]["next"] = "two"
    found = refused(minimal(start="one", state=state, nodes=nodes))
    assert ("nodes.two.join", "shared_join") in found


def test_sum_and_merge_fields_may_be_written_by_every_branch() -> None:
    data = briefing_data()
    data["state"]["count"] = {"reduce": "sum"}
    data["state"]["seen"] = {"reduce": "merge"}
    for branch in ("forecast", "headlines"):
        data["nodes"][branch]["assign"]["count"] = "${ `1` }"
        data["nodes"][branch]["assign"]["seen"] = {branch: True}
    validated = validate_artifact(data)
    assert validated.initial_state()["count"] == 0
    assert validated.initial_state()["seen"] == {}


def test_limits_are_enforced() -> None:
    nodes = {f"n{i}": {"kind": "end", "outcome": "ok"} for i in range(MAX_NODES + 1)}
    assert ("nodes", "bad_value") in refused(minimal(start="n0", nodes=nodes))
    del nodes[f"n{MAX_NODES}"]
    with pytest.raises(ArtifactValidationError) as caught:  # 255 unreachable nodes
        validate_artifact(minimal(start="n0", nodes=nodes))
    assert len(caught.value.issues) == MAX_ISSUES and caught.value.truncated
    big = {"kind": "end", "outcome": "ok", "output": "${ '" + "x" * 2000 + "' }"}
    many = {f"n{i}": dict(big) for i in range(150)}
    found = refused(
        minimal(
            start="n0", nodes=many, output_schema={"type": "object", "additionalProperties": False}
        )
    )
    assert ("$", "too_large") in found


def test_the_expression_count_is_bounded() -> None:
    closed = {"type": "object", "additionalProperties": False, "properties": {"a": {}}}
    end = {"kind": "end", "outcome": "ok", "output": {"a": ["${ @ }"] * (MAX_EXPRESSIONS + 1)}}
    found = refused(minimal(output_schema=closed, nodes={"done": end}))
    assert ("nodes", "too_many_expressions") in found
    end["output"] = {"a": ["${ @ }"] * MAX_EXPRESSIONS}
    assert validate_artifact(minimal(output_schema=closed, nodes={"done": end}))


def test_sum_fields_start_as_numbers() -> None:
    found = refused(minimal(state={"n": {"reduce": "sum", "initial": True}}))
    assert ("state.n.initial", "bad_initial") in found
    found = refused(minimal(state={"m": {"reduce": "merge", "initial": []}}))
    assert ("state.m.initial", "bad_initial") in found
    ok = validate_artifact(minimal(state={"n": {"reduce": "sum", "initial": 2.5}}))
    assert ok.initial_state() == {"n": 2.5}


def test_python_data_that_is_not_json_is_refused_with_its_place() -> None:
    data = briefing_data()
    data["nodes"]["forecast"]["arguments"]["days"] = {1, 2}
    data["nodes"]["forecast"]["arguments"][3] = "x"
    found = refused(data)
    assert ("nodes.forecast.arguments.days", "not_json") in found
    assert ("nodes.forecast.arguments", "key_not_string") in found
    assert refused(["not", "an", "object"]) == [("$", "not_object")]


def test_the_error_lists_every_issue() -> None:
    data = briefing_data()
    data["start"] = "nowhere"
    data["nodes"]["forecast"]["tool"] = "other"
    with pytest.raises(ArtifactValidationError) as caught:
        validate_artifact(data)
    assert len(caught.value.issues) >= 2
    assert "and 1 more issue" in str(caught.value) or "more issues" in str(caught.value)
    assert caught.value.to_json()[0].keys() == {"place", "code", "message", "hint", "next_actions"}


# -- generated artifacts -------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_paths(item, (*prefix, index)))
    return found


BASE = briefing_data()
ALL_PATHS = _paths(BASE)
EXPRESSIONS = st.sampled_from(
    [
        "${ state.nope }",
        "${ ",
        "${ input.city ",
        "${ [}",
        "${ `1` }",
        "${ @ }",
        "x ${ y }",
        "${ result.text }",
        "${ resume }",
        "${ sort_by(input, &city) }",
        "${ input.city }",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(ALL_PATHS),
            st.one_of(JSON, EXPRESSIONS, st.just("__delete__")),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_generated_artifacts_are_valid_or_refused_with_places(
    mutations: list[tuple[tuple[Any, ...], Any]],
) -> None:
    data = copy.deepcopy(BASE)
    for path, value in mutations:
        target: Any = data
        try:
            for part in path[:-1]:
                target = target[part]
            if value == "__delete__":
                del target[path[-1]]
            else:
                target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    try:
        validated = validate_artifact(data)
    except ArtifactValidationError as exc:
        assert exc.issues
        for issue in exc.issues:
            assert PLACE.fullmatch(issue.place), issue.place
            assert issue.code and issue.message
        return
    # Valid: the canonical form reads back to the same artifact.
    assert load_artifact(validated.canonical, format="json").digest == validated.digest


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_is_refused_with_places_or_accepted(text: str) -> None:
    try:
        load_artifact(text)
    except ArtifactValidationError as exc:
        assert all(PLACE.fullmatch(issue.place) for issue in exc.issues)
