"""The capability catalog's ranked index (flowledger/deploy/registry/ranking.py): how
identifiers become words, what a query matches, how fields weigh, restriction to a
session's sources, paging and counts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowledger.deploy.registry.ranking import MAX_QUERY_WORDS, IndexedTool, RankedIndex, words


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("get_current_time", "get current time"),
        ("getCurrentTime", "get Current Time"),
        ("HTTPServer", "HTTP Server"),
        ("files.read-all", "files read all"),
        ("tool-12", "tool 12"),
        ("utf8Decode", "utf 8 Decode"),
        ("  Convert  time, please!  ", "Convert time please"),
        ("", ""),
    ],
)
def test_identifiers_are_split_into_words(text: str, expected: str) -> None:
    assert words(text) == expected


@given(st.text(max_size=200))
def test_words_are_alphanumeric_and_single_spaced(text: str) -> None:
    split = words(text)
    assert "  " not in split and split == split.strip()
    assert all(part.isalnum() for part in split.split(" ") if part)


def tool(
    source: str, name: str, description: str = "", title: str = "", *params: str
) -> IndexedTool:
    return IndexedTool(source, name, title, description, tuple(params))


TOOLS = [
    tool("clock", "get_current_time", "Get current time in a specific timezone", "", "timezone"),
    tool("clock", "convert_time", "Convert time between timezones", "", "source_timezone", "time"),
    tool("files", "read_file", "Read a file from disk", "Read file", "path"),
    tool("files", "write_file", "Write a file; mentions time once", "", "path", "content"),
    tool("mail", "sendEmail", "Send an e-mail message", "Send mail", "to", "subject"),
]


def found(index: RankedIndex, query: str, sources: list[str] | None = None) -> list[str]:
    hits, total = index.search(query, sources or ["clock", "files", "mail"], limit=50)
    assert total == len(hits)
    return [f"{index.tools[h.ordinal].source}.{index.tools[h.ordinal].tool}" for h in hits]


def test_a_word_of_a_description_finds_its_tool_through_stemming() -> None:
    index = RankedIndex(TOOLS)
    assert found(index, "timezones")[:2] == ["clock.get_current_time", "clock.convert_time"]
    assert found(index, "converting") == ["clock.convert_time"]
    assert found(index, "messages") == ["mail.sendEmail"]


def test_name_words_count_more_than_description_words() -> None:
    # "time" is a word of two names and of one description only
    assert found(RankedIndex(TOOLS), "time")[-1] == "files.write_file"


def test_camel_case_names_and_parameter_names_are_searchable() -> None:
    index = RankedIndex(TOOLS)
    assert found(index, "email") == ["mail.sendEmail"]
    assert found(index, "subject") == ["mail.sendEmail"]
    assert found(index, "SEND_EMAIL") == ["mail.sendEmail"]


def test_more_matching_words_rank_higher() -> None:
    assert found(RankedIndex(TOOLS), "read file path")[0] == "files.read_file"


def test_search_is_restricted_to_the_sources_given() -> None:
    index = RankedIndex(TOOLS)
    assert sorted(found(index, "file time", ["clock"])) == [
        "clock.convert_time",
        "clock.get_current_time",
    ]
    assert found(index, "file", ["mail"]) == []
    assert index.search("file", [])[1] == 0


def test_queries_without_words_match_nothing() -> None:
    index = RankedIndex(TOOLS)
    for query in ("", "   ", "!?-_.", "the"):  # "the": the stemmer keeps it; no tool has it
        assert found(index, query) == []


def test_paging_covers_every_hit_once_in_order() -> None:
    index = RankedIndex(TOOLS)
    everything, total = index.search("time file mail", ["clock", "files", "mail"], limit=50)
    pages = []
    for offset in range(0, total, 2):
        page, count = index.search(
            "time file mail", ["clock", "files", "mail"], offset=offset, limit=2
        )
        assert count == total
        pages += page
    assert [h.ordinal for h in pages] == [h.ordinal for h in everything]
    assert len(everything) == total == 5


def test_equal_scores_keep_the_given_order() -> None:
    twins = [tool(source, "echo", "Echoes the input") for source in ("a", "b", "c", "d")]
    hits, _ = RankedIndex(twins).search("echo", ["a", "b", "c", "d"])
    assert [h.ordinal for h in hits] == [0, 1, 2, 3]
    assert len({h.score for h in hits}) == 1


def test_only_the_first_query_words_are_used() -> None:
    index = RankedIndex(TOOLS)
    many = " ".join(f"w{i}x" for i in range(MAX_QUERY_WORDS)) + " timezone"
    assert len(index.terms(many)) == MAX_QUERY_WORDS
    assert found(index, many) == []


def test_an_empty_index_answers_nothing() -> None:
    assert RankedIndex([]).search("anything", ["a"]) == ([], 0)
