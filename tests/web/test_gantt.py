"""The timeline's SVG (`flowledger.web.gantt`) escapes what it names: a vertex label or a
tool name comes from a tenant's artifact, so markup in one is text, never an element."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flowledger.web.gantt import render_gantt
from flowledger.web.timing import Bar, RunTime, duration_text

HOSTILE = '"><script>alert(1)</script><rect onload="x'


def test_labels_and_titles_are_escaped_and_bars_fit_the_run() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    bars = (
        Bar(HOSTILE, "vertex", "a", start, start + timedelta(seconds=2), "done", 3),
        Bar("dep/" + HOSTILE, "tool", "a", start + timedelta(seconds=1), None, "running"),
    )
    time = RunTime(4.0, False, start, start + timedelta(seconds=4), (), bars, False)
    svg = str(render_gantt(time, title=HOSTILE))
    assert "<script>" not in svg and 'onload="x' not in svg
    assert "&lt;script&gt;" in svg
    assert svg.count("<rect ") == 2
    assert 'data-attempts="3"' in svg and "3 attempts" in svg
    assert "took 3.0 s so far" in svg  # the open call runs to the read's now


def test_durations_read_in_two_units_at_most() -> None:
    cases = {0.25: "250 ms", 4.25: "4.2 s", 65: "1 min 5 s", 7260: "2 h 1 min", 90000: "1 d 1 h"}
    assert {seconds: duration_text(seconds) for seconds in cases} == cases
