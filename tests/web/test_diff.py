"""`flowledger.web.diff`: the data page's field-level difference of two states."""

from __future__ import annotations

from flowledger.web.diff import Change, diff


def test_nested_objects_and_arrays_name_the_paths_that_changed() -> None:
    old = {"draft": {"sections": ["a", "b", "c"], "by": "ann"}, "n": 1, "gone": True, "a/b~": 0}
    new = {"draft": {"sections": ["a", "B"], "by": "ann"}, "n": 1.0, "new": None, "a/b~": 1}
    changes, count = diff(old, new)
    assert changes == [
        Change("/a~1b~0", "changed", 0, 1),
        Change("/draft/sections/1", "changed", "b", "B"),
        Change("/draft/sections/2", "removed", old="c"),
        Change("/gone", "removed", old=True),
        Change("/n", "changed", 1, 1.0),  # an integer became a float
        Change("/new", "added", new=None),
    ]
    assert count == len(changes)


def test_the_first_revision_adds_every_field_and_equal_states_have_no_change() -> None:
    changes, _ = diff(None, {"b": [1], "a": {"x": 1}})
    assert changes == [Change("/a", "added", new={"x": 1}), Change("/b", "added", new=[1])]
    assert diff({"a": [1, {"b": True}]}, {"a": [1, {"b": True}]}) == ([], 0)
    assert diff({"a": True}, {"a": 1}) == ([Change("/a", "changed", True, 1)], 1)


def test_a_huge_difference_is_counted_beyond_the_rows_shown() -> None:
    changes, count = diff({}, {f"k{i:04}": i for i in range(800)})
    assert count == 800 and len(changes) == 500
