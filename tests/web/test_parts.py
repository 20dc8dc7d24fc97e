"""The dashboard's pure parts: forms from schemas, the graph picture, vertex states and
history cursors."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

from flowledger.examples.review import review_definition
from flowledger.web.forms import WHOLE, FormError, form_fields, parse_form
from flowledger.web.graph import graph_shape, layout, render_svg
from flowledger.web.states import vertex_states
from flowledger.web.views import Cursor, RunFilter, moment, parse_cursor

from .web_app import kinds_definition

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name", "count"],
    "properties": {
        "name": {"type": "string", "maxLength": 20, "description": "who"},
        "body": {"type": "string"},
        "count": {"type": "integer", "minimum": 1},
        "ratio": {"type": "number"},
        "ok": {"type": "boolean"},
        "color": {"enum": ["red", 2]},
        "tags": {"type": "array"},
    },
}


def test_fields_follow_the_schema() -> None:
    fields = {f.name: f for f in form_fields(SCHEMA)}
    assert {name: f.kind for name, f in fields.items()} == {
        "name": "text",
        "body": "textarea",
        "count": "integer",
        "ratio": "number",
        "ok": "boolean",
        "color": "enum",
        "tags": "json",
    }
    assert fields["name"].required and not fields["body"].required
    assert fields["name"].attributes == {"maxlength": "20"}
    assert fields["count"].attributes == {"step": "1", "min": "1"}
    assert fields["color"].options == ('"red"', "2")
    assert fields["color"].choices == [('"red"', "red"), ("2", "2")]  # no JSON quotes shown
    assert [f.name for f in form_fields({"type": "array"})] == [WHOLE]
    assert [f.name for f in form_fields(None)] == [WHOLE]


def test_parse_turns_fields_into_json() -> None:
    value = parse_form(
        SCHEMA,
        {
            "name": "a",
            "body": "",
            "count": " 3 ",
            "ratio": "1.5",
            "ok": "false",
            "color": "2",
            "tags": '["x"]',
            "csrf": "ignored",
        },
    )
    assert value == {"name": "a", "count": 3, "ratio": 1.5, "ok": False, "color": 2, "tags": ["x"]}
    assert parse_form(SCHEMA, {"name": "a", "count": "1", "ratio": "2"})["ratio"] == 2
    assert parse_form({"type": "array"}, {WHOLE: "[1, 2]"}) == [1, 2]


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"count": "1"}, "name: is required"),
        ({"name": "a"}, "count: is required"),
        ({"name": "a", "count": "1.5"}, "count: must be a whole number"),
        ({"name": "a", "count": "1", "ratio": "nan"}, "ratio: must be a finite number"),
        ({"name": "a", "count": "1", "ok": "yes"}, "ok: choose yes or no"),
        ({"name": "a", "count": "1", "tags": "{"}, "tags: is not valid JSON"),
    ],
)
def test_parse_names_the_bad_field(form: dict[str, str], message: str) -> None:
    with pytest.raises(FormError, match=re.escape(message)):
        parse_form(SCHEMA, form)


def test_required_fields_come_first_in_schema_order() -> None:
    schema = {
        "type": "object",
        "required": ["z", "b"],
        "properties": {"a": {"type": "string"}, "z": {"type": "string"}, "c": {}, "b": {}},
    }
    assert [f.name for f in form_fields(schema)] == ["z", "b", "a", "c"]
    assert [f.name for f in form_fields(SCHEMA)][:2] == ["name", "count"]


def test_a_plain_string_is_one_line_and_a_body_is_a_textarea() -> None:
    fields = {
        f.name: f.kind
        for f in form_fields(
            {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "Document": {"type": "string"},
                    "short_note": {"type": "string", "maxLength": 30},
                    "path": {"type": "string", "maxLength": 4096},
                },
            }
        )
    }
    assert fields == {
        "title": "text",
        "Document": "textarea",
        "short_note": "textarea",
        "path": "text",
    }


def test_an_enum_default_is_the_text_of_its_option() -> None:
    schema = {"type": "object", "properties": {"c": {"enum": ["red", 2], "default": "red"}}}
    (field,) = form_fields(schema)
    assert field.default == '"red"' and field.default in field.options


def test_json_fields_say_what_json_they_take() -> None:
    fields = {f.name: f.hint for f in form_fields(SCHEMA)}
    assert fields["tags"] == 'JSON: a list, like ["a", "b"]'
    assert fields["name"] == "" and fields["count"] == ""
    assert form_fields({"type": "object"})[0].hint == 'JSON: an object, like {"key": "value"}'
    assert form_fields(None)[0].hint.startswith("JSON: a value")


def test_every_bad_field_is_named() -> None:
    form = {"count": "1.5", "ratio": "nan", "ok": "yes", "tags": "{"}
    with pytest.raises(FormError) as caught:
        parse_form(SCHEMA, form)
    assert [name for name, _ in caught.value.problems] == ["name", "count", "ratio", "ok", "tags"]
    text = str(caught.value)
    assert text.startswith("name: is required; count: must be a whole number; ")
    assert caught.value.field == "name"


def test_a_repeated_json_key_is_refused_with_its_pointer() -> None:
    """Regression: a JSON field or a whole-document form with a key twice kept the last."""
    with pytest.raises(FormError, match=re.escape("duplicate key 'n' at /n")):
        parse_form({"type": "object"}, {WHOLE: '{"n": 3, "n": 4}'})
    with pytest.raises(FormError, match=re.escape("tags: is not valid JSON (duplicate key")):
        parse_form(SCHEMA, {"name": "a", "count": "1", "tags": '[{"k": 1, "k": 2}]'})


def test_the_picture_has_every_vertex_edge_and_role() -> None:
    shape = graph_shape(review_definition())
    assert shape is not None
    assert shape.entry == "intake" and shape.finish == "finalize"
    picture = layout(shape)
    assert len(picture.vertices) == 7 and len(picture.edges) == 8
    placed = {v.id: v for v in picture.vertices}
    assert placed["intake"].y < placed["report"].y < placed["finalize"].y  # layered
    for v in picture.vertices:  # inside the picture
        assert v.x - v.w / 2 >= 0 and v.x + v.w / 2 <= picture.width
    svg = str(render_svg(picture, {"intake": "done"}, title="g <1>"))
    assert svg.count('class="vertex"') == 7 and svg.count('class="edge"') == 8
    assert 'data-vertex="intake" data-state="done" data-role="entry"' in svg
    assert 'data-vertex="finalize" data-state="not_reached" data-role="finish"' in svg
    assert ">style check</text>" in svg and 'aria-label="g &lt;1&gt;"' in svg


def test_routes_are_drawn_and_loops_laid_out() -> None:
    shape = graph_shape(kinds_definition())
    assert shape is not None
    assert set(shape.routes) == {("work", "work"), ("work", "done")}
    svg = str(render_svg(layout(shape), {}, title="kinds"))
    assert 'class="route" data-source="work" data-target="done"' in svg
    assert '<path class="route" data-source="work" data-target="work"' in svg  # the loop


def _research_definition() -> Any:
    """The research agent example (examples/ is an app directory, not a package)."""
    path = Path(__file__).parents[2] / "examples" / "research_agent.py"
    spec = importlib.util.spec_from_file_location("research_agent_for_picture", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.research_definition()


def test_opposite_edges_are_two_arrows() -> None:
    """draft -> critique and critique's route back to draft once lay on one line and read
    as one double-headed arrow (issue #31)."""
    shape = graph_shape(_research_definition())
    assert shape is not None
    svg = str(render_svg(layout(shape), {}, title="research"))

    def line(source: str, target: str) -> list[tuple[float, float]]:
        match = re.search(f'data-source="{source}" data-target="{target}" points="([^"]+)"', svg)
        assert match, (source, target)
        return [tuple(map(float, p.split(","))) for p in match.group(1).split()]  # type: ignore[misc]

    there, back = line("draft", "critique"), line("critique", "draft")
    assert set(there) != set(back)  # not the same segment drawn twice
    # and apart along their whole length: the lines are parallel, a few px from each other
    (x0, y0), (x1, y1) = there[0], there[-1]
    length = ((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5
    for x, y in back:
        assert abs((x1 - x0) * (y - y0) - (y1 - y0) * (x - x0)) / length > 4
    assert line("plan", "search_web")  # a lone edge keeps grandalf's line


def test_vertex_states_from_history_status_and_pause() -> None:
    shape = graph_shape(review_definition())
    assert shape is not None
    started = vertex_states(shape, {"run_status": "running"}, [])
    assert started["intake"] == "running" and started["report"] == "not_reached"
    entries = [
        {"kind": "vertex_completed", "vertex_id": "intake"},
        {"kind": "vertex_completed", "vertex_id": "style"},
    ]
    running = vertex_states(shape, {"run_status": "running"}, entries)
    assert running["intake"] == running["style"] == "done"
    assert running["facts"] == running["summarize"] == "running"
    assert running["report"] == "not_reached"  # a join: it waits for all three checks
    entries += [{"kind": "vertex_completed", "vertex_id": v} for v in ("facts", "summarize")]
    joined = vertex_states(shape, {"run_status": "running"}, entries)
    assert joined["report"] == "running" and joined["approval"] == "not_reached"
    loop = graph_shape(kinds_definition())
    assert loop is not None
    routed = vertex_states(
        loop, {"run_status": "running"}, [{"kind": "vertex_completed", "vertex_id": "work"}]
    )
    assert routed == {"work": "done", "done": "running"}  # a route's target: a candidate
    paused = vertex_states(
        shape,
        {"run_status": "interrupted", "pending": {"kind": "request", "vertex_id": "approval"}},
        entries,
    )
    assert paused["approval"] == "paused" and paused["report"] == "not_reached"
    errored = vertex_states(
        shape,
        {
            "run_status": "interrupted",
            "pending": {"kind": "error", "vertices": [{"vertex_id": "facts"}]},
        },
        entries,
    )
    assert errored["facts"] == "failed"


def test_cursors_and_filters() -> None:
    assert parse_cursor("") == Cursor()
    assert parse_cursor("4:abc") == Cursor(4, "abc")
    for bad in ("4", "x:abc", "4:", "-1:a", "9" * 20 + ":a"):
        assert parse_cursor(bad) is None
    assert Cursor(4, "abc").arguments() == {"after_revision": 4, "after_event_id": "abc"}
    assert Cursor().arguments() == {"after_revision": 0}
    run = {"run_id": "abcd-1", "run_status": "running", "definition_name": "d", "created_at": "1"}
    assert RunFilter("running", "d", "ABCD").matches(run)
    assert not RunFilter("completed").matches(run)
    assert not RunFilter(definition="e").matches(run)
    assert not RunFilter(search="zz").matches(run)
    assert not RunFilter(search="bcd").matches(run)  # a search is an ID's start
    assert RunFilter("done", "d", "AB").arguments() == {
        "order": "newest",
        "status": "done",
        "definition": "d",
        "run_id_prefix": "ab",
    }


def test_times_compare_as_instants() -> None:
    # fractional seconds have no fixed width: as text, ":03Z" would sort after ":03.1Z"
    assert moment("2026-01-01T00:00:03Z") < moment("2026-01-01T00:00:03.1Z")
    assert moment("2026-01-01T00:00:03.1Z") < moment("2026-01-01T00:00:03.12Z")
    assert moment("") == moment("nonsense") < moment("2000-01-01T00:00:00Z")
