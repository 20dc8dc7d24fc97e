"""`RankedIndex`: ranked full-text search over tool listings (the capability catalog's).

What is indexed, per tool: its name, title, description and the names of its input
parameters (top-level properties), each a field with its own weight (`WEIGHTS`: a
word of the name counts most, one of the description least). Identifiers are split
into words first (`words`): ``get_current_time``, ``getCurrentTime``, ``get.current-
time`` and ``HTTPServer`` become ``get current time`` and ``http server``; then every
field is lowercased and stemmed (English Snowball), so "converts" finds "convert" and
"timezones" finds "timezone". A query goes through the same steps and matches a tool
when any of its words does; tools matching more, rarer words, in heavier fields, rank
higher (BM25 per field, summed).

The index is built in memory with tantivy (the Rust search library's Python binding):
a well-kept library with no Python dependencies, BM25 scoring, stemming and per-field
boosts, answering a query over 1,000 tools in well under a millisecond (bench/
catalog.py). It is immutable once built: a changed listing builds a new one (fast: a
few tens of milliseconds for 1,000 tools), so concurrent searches never see a half-
built index, and results are ordered deterministically: by score, then by insertion
order (sources and tools sorted by name).

Searches are restricted to a set of sources (the asking session's visible, enabled
ones) inside the index, so paging and counts are exact for that session.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import tantivy

__all__ = ["MAX_QUERY_WORDS", "WEIGHTS", "IndexedTool", "Ranked", "RankedIndex", "words"]

#: Field weights: how much one matching word of each field counts.
WEIGHTS: Final = {"name": 4.0, "title": 3.0, "params": 1.5, "description": 1.0}
#: Distinct words of a query that are used (the first ones); more are ignored.
MAX_QUERY_WORDS: Final = 32

_ANALYZER: Final = "catalog"
_HEAP_BYTES: Final = 15_000_000  # tantivy's minimum writer arena; one thread, one segment
# Identifier boundaries: lower->Upper, Acronym->Word (HTTPServer), letters<->digits.
_CAMEL: Final = re.compile(
    r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])"
)
_SEPARATORS: Final = re.compile(r"[\W_]+")


def words(text: str) -> str:
    """``text`` with identifiers split into words (snake_case, camelCase, dots, dashes,
    digits), separated by single spaces; case is kept (the analyzer lowercases)."""
    return " ".join(
        part for chunk in _SEPARATORS.split(text) for part in _CAMEL.split(chunk) if part
    )


@dataclass(frozen=True)
class IndexedTool:
    """One tool as the index sees it."""

    source: str
    tool: str
    title: str
    description: str
    params: tuple[str, ...]


@dataclass(frozen=True)
class Ranked:
    """One search hit: the tool (by its position in the index's input) and its score."""

    ordinal: int
    score: float


def _analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


class RankedIndex:
    """An immutable index over ``tools`` (the order given is the tie-break order)."""

    def __init__(self, tools: Sequence[IndexedTool]) -> None:
        self.tools = tuple(tools)
        builder = tantivy.SchemaBuilder()
        builder.add_unsigned_field("ordinal", stored=True)
        builder.add_text_field("source", tokenizer_name="raw")
        for field in WEIGHTS:
            builder.add_text_field(field, tokenizer_name=_ANALYZER)
        self._schema = builder.build()
        self._analyzer = _analyzer()
        self._index = tantivy.Index(self._schema)
        self._index.register_tokenizer(_ANALYZER, self._analyzer)
        writer = self._index.writer(heap_size=_HEAP_BYTES, num_threads=1)
        for ordinal, tool in enumerate(self.tools):
            document = tantivy.Document()
            document.add_unsigned("ordinal", ordinal)
            document.add_text("source", tool.source)
            document.add_text("name", words(tool.tool))
            document.add_text("title", words(tool.title))
            document.add_text("description", words(tool.description))
            document.add_text("params", " ".join(words(param) for param in tool.params))
            writer.add_document(document)
        writer.commit()
        writer.wait_merging_threads()
        self._index.reload()
        self._searcher = self._index.searcher()

    def terms(self, query: str) -> list[str]:
        """The distinct analyzed words of ``query`` (at most `MAX_QUERY_WORDS`)."""
        found: dict[str, None] = {}
        for term in self._analyzer.analyze(words(query)):
            found[term] = None
            if len(found) == MAX_QUERY_WORDS:
                break
        return list(found)

    def search(
        self, query: str, sources: Iterable[str], *, offset: int = 0, limit: int = 20
    ) -> tuple[list[Ranked], int]:
        """The hits of ``query`` among the tools of ``sources``, best first, from
        ``offset`` (at most ``limit``), and how many there are in all."""
        terms = self.terms(query)
        allowed = sorted(set(sources))
        if not terms or not allowed or not self.tools:
            return [], 0
        schema = self._schema
        matching = tantivy.Query.boolean_query(
            [
                (
                    tantivy.Occur.Should,
                    tantivy.Query.boost_query(
                        tantivy.Query.term_query(schema, field, term), weight
                    ),
                )
                for term in terms
                for field, weight in WEIGHTS.items()
            ]
        )
        restricted = tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Must, tantivy.Query.term_set_query(schema, "source", allowed)),
                (tantivy.Occur.Must, matching),
            ]
        )
        found = self._searcher.search(restricted, limit, count=True, offset=offset)
        hits = [
            Ranked(int(self._searcher.doc(address)["ordinal"][0]), float(score))
            for score, address in found.hits
        ]
        total = getattr(found, "count", None)  # asked for (count=True); not in the stubs
        return hits, int(total or 0)
