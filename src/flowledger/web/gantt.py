"""A run's timeline as a server-rendered SVG Gantt chart: one row per vertex (by label)
and per tool, in the order they first started, a bar per execution or call, placed on
the run's time from its start to its end (or now). No script draws it; each bar carries
its state (``data-state``, coloured by the CSS, and a sign in its tooltip, not colour
alone) and a ``<title>`` with its start (UTC), duration and attempts."""

from __future__ import annotations

from datetime import datetime
from typing import Final

from markupsafe import Markup, escape

from .timing import Bar, RunTime, duration_text

__all__ = ["MAX_BARS", "render_gantt"]

MAX_BARS: Final = 400  # bars drawn; the page says when there are more
_LABELS: Final = 190.0  # px for the row names
_CHART: Final = 620.0  # px for the bars
_ROW: Final = 22.0
_TOP: Final = 24.0  # the axis' labels
_MIN_BAR: Final = 2.0
_CHARS: Final = 26  # a row name is cut after so many characters (whole on hover)
_STATES: Final = {  # a record's status as the graph picture's states (`states.STATES`)
    "done": "done",
    "completed": "done",
    "ok": "done",
    "running": "running",
    "pending": "running",
    "interrupted": "paused",
    "failed": "failed",
    "error": "failed",
}
_SIGNS: Final = {"done": "✓", "running": "▶", "paused": "‖", "failed": "✗"}


def _fmt(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def _utc(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def render_gantt(time: RunTime, *, title: str) -> Markup:
    bars = list(time.bars[:MAX_BARS])
    lanes: list[tuple[str, str]] = []  # (kind, name), first start first
    for bar in bars:
        if (bar.kind, bar.lane) not in lanes:
            lanes.append((bar.kind, bar.lane))
    span = max((time.end - time.start).total_seconds(), 1e-3)
    height = _TOP + _ROW * max(1, len(lanes)) + 4
    width = _LABELS + _CHART + 8
    out = [
        f'<svg class="gantt" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {_fmt(width)} {_fmt(height)}" width="{_fmt(width)}" '
        f'height="{_fmt(height)}" aria-label="{escape(title)}">'
    ]
    for i in range(5):  # the axis: 0, a quarter, ... the whole run
        x = _LABELS + _CHART * i / 4
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        out.append(
            f'<line class="tick" x1="{_fmt(x)}" y1="{_TOP - 4}" x2="{_fmt(x)}" y2="{height}"/>'
        )
        out.append(
            f'<text class="axis" x="{_fmt(x)}" y="{_TOP - 8}" text-anchor="{anchor}">'
            f"{escape(duration_text(span * i / 4) if i else '0')}</text>"
        )
    for row, (kind, name) in enumerate(lanes):
        y = _TOP + _ROW * row
        shown = name if len(name) <= _CHARS else name[: _CHARS - 1] + "…"
        out.append(
            f'<text class="lane lane-{kind}" x="{_LABELS - 8}" y="{_fmt(y + _ROW * 0.68)}" '
            f'text-anchor="end"><title>{escape(name)}</title>{escape(shown)}</text>'
        )
        for bar in bars:
            if (bar.kind, bar.lane) == (kind, name):
                out.append(_bar(bar, y, time, span))
    out.append("</svg>")
    return Markup("".join(out))


def _bar(bar: Bar, y: float, time: RunTime, span: float) -> str:
    end = bar.end or time.end
    x0 = _LABELS + _CHART * max(0.0, (bar.start - time.start).total_seconds()) / span
    x1 = _LABELS + _CHART * max(0.0, (end - time.start).total_seconds()) / span
    x0 = min(x0, _LABELS + _CHART - _MIN_BAR)
    width = max(_MIN_BAR, min(x1, _LABELS + _CHART) - x0)
    state = _STATES.get(bar.status, "running" if bar.end is None else "done")
    took = duration_text(max(0.0, (end - bar.start).total_seconds()))
    tries = f", {bar.attempts} attempts" if bar.attempts > 1 else ""
    so_far = " so far" if bar.end is None else ""
    tip = (
        f"{_SIGNS.get(state, '')} {bar.lane} ({'tool call' if bar.kind == 'tool' else 'vertex'}"
        f", {state.replace('_', ' ')}): started {_utc(bar.start)}, took {took}{so_far}{tries}"
    )
    return (
        f'<rect class="bar bar-{bar.kind}" data-state="{state}" data-vertex="{escape(bar.vertex)}" '
        f'data-attempts="{bar.attempts}" x="{_fmt(x0)}" y="{_fmt(y + 4)}" '
        f'width="{_fmt(width)}" height="{_fmt(_ROW - 8)}" rx="2">'
        f"<title>{escape(tip)}</title></rect>"
    )
