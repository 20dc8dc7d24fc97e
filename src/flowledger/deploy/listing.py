"""`NamePage`: one page of a sorted list of names, filtered by a query.

``artifact_list``, ``deployment_list`` and ``draft_list`` page the same way: names in
byte order (stable: a name's place never depends on what else exists), ``query`` keeps
the names containing it (so a prefix is a query too), at most ``limit`` per page, and
``cursor`` is the last name of the previous page (the page starts strictly after it, and
that name need not exist any more). ``next`` is the cursor of the following page, or
None when this page is the last. A name added or deleted between pages is seen or not
according to where it sorts; no other name is skipped or repeated.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEFAULT_PAGE",
    "MAX_CURSOR",
    "MAX_PAGE",
    "MAX_QUERY",
    "NamePage",
    "page_limit",
    "page_names",
]

DEFAULT_PAGE: Final = 50
MAX_PAGE: Final = 500
MAX_QUERY: Final = 64
MAX_CURSOR: Final = 128


@dataclass(frozen=True, slots=True)
class NamePage:
    names: list[str]
    next: str | None


def page_limit(limit: int | None) -> int:
    """``limit``, or `DEFAULT_PAGE` for None; `ValueError` outside 1..`MAX_PAGE`."""
    if limit is None:
        return DEFAULT_PAGE
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be an integer in 1..{MAX_PAGE}, not {limit!r}")
    return limit


def page_names(
    names: Iterable[str],
    *,
    query: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> NamePage:
    """The page of ``names`` (any order, duplicates ignored) that the arguments select;
    `ValueError` naming the argument when one is out of range."""
    if query is not None and (not isinstance(query, str) or len(query) > MAX_QUERY):
        raise ValueError(f"query must be a string of at most {MAX_QUERY} characters")
    limit = page_limit(limit)
    if cursor is not None and (
        not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR
    ):
        raise ValueError(
            f"cursor must be the `next` of a previous page (1..{MAX_CURSOR} characters)"
        )
    ordered = sorted({name for name in names if not query or query in name})
    start = 0 if cursor is None else bisect.bisect_right(ordered, cursor)
    chosen = ordered[start : start + limit]
    more = start + limit < len(ordered)
    return NamePage(chosen, chosen[-1] if chosen and more else None)
