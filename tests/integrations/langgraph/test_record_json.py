"""Records are written by orjson: the bytes `json` would write for what records and stored
lists hold (so stored lists keep their digests), and `json` for what orjson refuses; what
goes in reads back equal, through the saver; a non-finite version is refused."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from flowledger.integrations.langgraph import FlowledgerSaver, InvalidConfigError
from flowledger.integrations.langgraph.records import dumps_record, parse_record


def json_bytes(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def random_text(pick: random.Random) -> str:
    ranges = [(0x20, 0x7E), (0, 0x1F), (0x80, 0x7FF), (0x800, 0xD7FF), (0xE000, 0x10FFFF)]
    out = []
    for _ in range(pick.randint(0, 12)):
        low, high = pick.choice(ranges)
        out.append(chr(pick.randint(low, high)))
    return "".join(out)


def test_the_bytes_are_those_of_json_for_text_integers_and_containers() -> None:
    pick = random.Random(7)
    for _ in range(3000):
        text = random_text(pick)
        doc = {
            text: [text, pick.randint(-(2**63), 2**64 - 1), {"k": [text, None]}],
            "b": [True, False, None, [], {}],
            '"\\': "\u2028\u2029\x7f",
        }
        assert dumps_record(doc) == json_bytes(doc), repr(text)


@pytest.mark.parametrize(
    "doc",
    [
        {"m": {"big": 2**70, "neg": -(2**64) - 1}},  # beyond 64 bits: orjson refuses
        {"m": {"\ud800": "lone \udfff surrogates"}},  # not UTF-8: escaped by json
        {"m": {"f": [1e-7, 1e16, 0.1, -0.0, 2.5e-300]}},  # spelled differently, equal
    ],
    ids=["big-integers", "lone-surrogates", "floats"],
)
def test_what_orjson_refuses_or_spells_differently_reads_back_equal(doc: dict[str, Any]) -> None:
    record = {"c": "1", "ts": "t", "v": 1, "cv": {}, "vs": {}, "vals": {}, **doc}
    parsed = parse_record(2, dumps_record(record), "test")
    assert parsed.metadata == doc["m"]  # type: ignore[union-attr]


def checkpoint(versions: dict[str, Any]) -> dict[str, Any]:
    cp: dict[str, Any] = dict(empty_checkpoint())
    cp["channel_values"] = dict.fromkeys(versions, 1)
    cp["channel_versions"] = versions
    return cp


CONFIG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


async def test_metadata_and_versions_read_back_equal_through_the_saver(store_url: str) -> None:
    metadata = {
        "source": "input",
        "step": -1,
        "big": 2**70,
        "small": 1e-7,
        "name": "lone \udc80 surrogate",
        "nested": {"x": [1.5, None, True, "é\u2028"]},
    }
    versions = {"a": 1, "b": "00000000000000000000000000000002.0000000000000000", "c": 2.5}
    async with FlowledgerSaver.from_url(store_url) as saver:
        await saver.aput(CONFIG, checkpoint(versions), metadata, versions)  # type: ignore[arg-type]
        got = await saver.aget_tuple(CONFIG)
        assert got is not None
        assert {k: got.metadata[k] for k in metadata} == metadata  # type: ignore[literal-required]
        assert got.checkpoint["channel_versions"] == versions


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
async def test_a_non_finite_version_is_refused_and_nothing_is_written(
    tmp_path: Path, bad: float
) -> None:
    async with FlowledgerSaver.from_url(f"sqlite:///{tmp_path / 'v.db'}") as saver:
        meta = {"source": "input", "step": -1}
        with pytest.raises(InvalidConfigError, match=r"checkpoint\['channel_versions'\]\['x'\]"):
            await saver.aput(CONFIG, checkpoint({"x": bad}), meta, {"x": bad})  # type: ignore[arg-type]
        cp = checkpoint({"x": 1})
        cp["versions_seen"] = {"node": {"x": bad}}
        with pytest.raises(InvalidConfigError, match=r"versions_seen'\]\['node'\]\['x'\]"):
            await saver.aput(CONFIG, cp, meta, {"x": 1})  # type: ignore[arg-type]
        assert await saver.aget_tuple(CONFIG) is None
        assert await saver.store.ledger.names("langgraph/") == []
