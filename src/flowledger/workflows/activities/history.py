"""Paging through a run's projected activity history (workflows-spec §6.6 steps 1, 7-9).

A page holds whole revision groups (all activities of one checkpoint revision)
so that a reader never sees half a transition, except when a single revision
alone has more activities than the page limit: then the page is cut inside
that revision and ``next_event_id`` names the last activity returned.

Cursors: continue with ``after_revision=next_revision`` and
``after_event_id=next_event_id``. Both ``None`` means the history is exhausted. An
``after_event_id`` that is not an activity of revision ``after_revision`` is a
`HistoryCursorError` (the reference skips that whole revision instead, which silently
loses its activities; a cursor a page returned always matches).

`page_history` pages an in-memory list; `ActivityJournal.page` gives the same
answers straight from the durable journal, reading O(log n + page) records.
The two share `PageBuilder`, so they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from ..errors import HistoryCursorError
from .activity import ProjectedActivity

__all__ = [
    "DEFAULT_HISTORY_PAGE",
    "MAX_HISTORY_PAGE",
    "MAX_HISTORY_RECORDS",
    "HistoryPage",
    "PageBuilder",
    "check_page_args",
    "page_history",
]

DEFAULT_HISTORY_PAGE: Final = 50
MAX_HISTORY_PAGE: Final = 100
#: The most projected records a history read may serve from a projection (§6.6 step 6;
#: enforced by the caller that projects, since the journal itself pages in O(page)).
MAX_HISTORY_RECORDS: Final = 10_000

_ZERO_UUID: Final = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class HistoryPage:
    records: list[ProjectedActivity]
    next_revision: int | None
    next_event_id: str | None


def check_page_args(
    after_revision: int, after_event_id: str | None, limit: int
) -> tuple[int, str | None]:
    """Validate paging arguments (§6.6 step 1); return ``(limit, after_event_id)``
    normalised: limit 0 means the default page, and ``None``, ``""`` or the zero UUID mean
    "no event cursor". Bad values raise `ValueError` (`TypeError` for wrong types)."""
    for name, value in (("limit", limit), ("after_revision", after_revision)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int")
    if limit == 0:
        limit = DEFAULT_HISTORY_PAGE
    if not 1 <= limit <= MAX_HISTORY_PAGE:
        raise ValueError(f"history limit must be in 1..{MAX_HISTORY_PAGE}, not {limit}")
    if after_revision < 0:
        raise ValueError(f"after_revision must be >= 0, not {after_revision}")
    if after_event_id is not None and not isinstance(after_event_id, str):
        raise TypeError("after_event_id must be a str or None")
    if not after_event_id or after_event_id == _ZERO_UUID:
        return limit, None
    return limit, after_event_id


@dataclass
class PageBuilder:
    """Streaming form of steps 7-9: feed records in history order (starting anywhere at or
    before the first record with ``revision >= after_revision``) until `feed` returns
    False, then call `finish` with whether the source was exhausted."""

    after_revision: int
    after_event_id: str | None
    limit: int
    page: list[ProjectedActivity] = field(default_factory=list)
    group: list[ProjectedActivity] = field(default_factory=list)
    _skipping: bool = field(init=False)
    _split: tuple[int, str] | None = field(default=None, init=False)
    _stopped: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self._skipping = self.after_event_id is not None

    def feed(self, item: ProjectedActivity) -> bool:
        """Take one record; False once the page is decided (no more input is needed)."""
        if self._stopped:
            return False
        revision = item.revision
        if revision < self.after_revision:
            return True
        if self._skipping:
            if revision == self.after_revision:
                if item.activity.event_id == self.after_event_id:
                    self._skipping = False  # skip up to and including the cursor event
                return True
            self._no_such_cursor()
        if self.group and self.group[0].revision != revision and not self._close_group():
            self._stopped = True
            return False
        self.group.append(item)
        if self.page and len(self.page) + len(self.group) > self.limit:
            self._stopped = True  # this group does not fit after the records we have
            return False
        if not self.page and len(self.group) > self.limit:
            taken = self.group[: self.limit]
            self.page = taken
            self._split = (revision, taken[-1].activity.event_id)
            self._stopped = True
            return False
        return True

    def _no_such_cursor(self) -> None:
        assert self.after_event_id is not None
        raise HistoryCursorError(self.after_revision, self.after_event_id)

    def _close_group(self) -> bool:
        """Append the finished group; False (and nothing appended) if it does not fit."""
        if self.page and len(self.page) + len(self.group) > self.limit:
            return False
        self.page.extend(self.group)
        self.group = []
        return True

    def finish(self) -> HistoryPage:
        """The page. Records remain exactly when `feed` stopped early."""
        if self._skipping:  # the source ended before the cursor event
            self._no_such_cursor()
        if self._split is not None:
            revision, event = self._split
            return HistoryPage(self.page, revision, event)
        if not self._stopped and self.group:
            # The source ran out: the last group fits (feed would have stopped otherwise).
            self.page.extend(self.group)
            self.group = []
        if self._stopped and self.page:
            return HistoryPage(self.page, self.page[-1].revision + 1, None)
        return HistoryPage(self.page, None, None)


def page_history(
    records: Sequence[ProjectedActivity],
    *,
    after_revision: int = 0,
    after_event_id: str | None = None,
    limit: int = 0,
) -> HistoryPage:
    """One page of ``records`` (ordered by non-decreasing revision) per §6.6 steps 1, 7-9."""
    limit, cursor = check_page_args(after_revision, after_event_id, limit)
    builder = PageBuilder(after_revision, cursor, limit)
    for item in records:
        if not builder.feed(item):
            break
    return builder.finish()
