"""JSON only, never pickle: a pickled value planted in storage is refused with a typed
error and never loaded; a serializer that writes anything but JSON is refused before
anything is stored; bad input gets a typed error that says where, and writes nothing."""

from __future__ import annotations

import base64
import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from flowledger.integrations.langgraph import (
    CorruptCheckpointError,
    FlowledgerSaver,
    InvalidConfigError,
    JsonSerializer,
    PickleRefusedError,
    UnserializableValueError,
    UnsupportedSerializationError,
)
from flowledger.integrations.langgraph.names import log_name
from flowledger.storage import digest_of


class Planted:
    """Loading its pickle would create a directory: the proof that it was loaded."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (self.path,))


CONFIG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def checkpoint(values: dict[str, Any]) -> dict[str, Any]:
    cp: dict[str, Any] = dict(empty_checkpoint())
    cp["channel_values"] = values
    cp["channel_versions"] = dict.fromkeys(values, 1)
    return cp


async def plant(
    saver: FlowledgerSaver, value: Any, attachments: dict[str, bytes] | None = None
) -> str:
    """Append by hand, after the saver's own checkpoint, a newer checkpoint whose channel
    ``x`` holds ``value`` (a stored value form); return its id."""
    name = log_name("langgraph", "t", "", 1)
    tip = await saver.store.ledger.tip(name)
    planted_id = "1ffffff0-0000-6000-8000-000000000000"
    doc = {
        "c": planted_id,
        "ts": "2030-01-01T00:00:00+00:00",
        "v": 1,
        "m": {"source": "loop", "step": 9},
        "cv": {"x": 2},
        "vs": {},
        "vals": {"x": value},
    }
    await saver.store.ledger.append(
        name, [json.dumps(doc).encode()], expected=tip, attachments=attachments or {}
    )
    return planted_id


@pytest.mark.parametrize("stored", ["inline", "attachment"])
async def test_a_planted_pickle_is_refused_and_never_loaded(
    store_url: str, tmp_path: Path, stored: str
) -> None:
    marker = tmp_path / "pickle-was-loaded"
    data = pickle.dumps(Planted(str(marker)))
    async with FlowledgerSaver.from_url(store_url) as saver:
        await saver.aput(
            CONFIG, checkpoint({"x": "fine"}), {"source": "input", "step": -1}, {"x": 1}
        )
        if stored == "inline":
            await plant(saver, {"t": "pickle", "b": base64.b64encode(data).decode()})
        else:
            await plant(saver, {"t": "pickle", "d": digest_of(data)}, {digest_of(data): data})
        with pytest.raises(
            PickleRefusedError, match=r"channel 'x'.*'pickle'.*never loads pickled data"
        ):
            await saver.aget_tuple(CONFIG)
        with pytest.raises(PickleRefusedError):
            [item async for item in saver.alist(CONFIG)]
    assert not marker.exists()


async def test_pickle_bytes_under_a_json_tag_are_not_json(tmp_path: Path) -> None:
    marker = tmp_path / "pickle-was-loaded"
    data = pickle.dumps(Planted(str(marker)))
    async with FlowledgerSaver.from_url(f"sqlite:///{tmp_path / 'f.db'}") as saver:
        await saver.aput(
            CONFIG, checkpoint({"x": "fine"}), {"source": "input", "step": -1}, {"x": 1}
        )
        await plant(saver, digest_of(data), {digest_of(data): data})
        with pytest.raises(CorruptCheckpointError, match=r"channel 'x'.*not JSON"):
            await saver.aget_tuple(CONFIG)
    assert not marker.exists()


def test_the_serializer_refuses_pickle_and_other_formats() -> None:
    serde = JsonSerializer()
    with pytest.raises(PickleRefusedError):
        serde.loads_typed(("pickle", pickle.dumps({"a": 1})))
    with pytest.raises(UnsupportedSerializationError, match="'msgpack' is not JSON"):
        serde.loads_typed(("msgpack", b"\x81\xa1a\x01"))


async def test_a_serde_that_writes_pickle_or_msgpack_is_refused_before_writing(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'f.db'}"
    for serde in (JsonPlusSerializer(pickle_fallback=True), JsonPlusSerializer()):
        async with FlowledgerSaver.from_url(url, serde=serde) as saver:
            with pytest.raises(
                UnsupportedSerializationError, match=r"channel 'x'.*'msgpack' is not JSON"
            ):
                await saver.aput(
                    CONFIG, checkpoint({"x": {"a": 1}}), {"source": "input", "step": -1}, {"x": 1}
                )
            assert await saver.aget_tuple(CONFIG) is None


async def test_bad_input_is_a_typed_error_naming_where_and_writes_nothing(tmp_path: Path) -> None:
    async with FlowledgerSaver.from_url(f"sqlite:///{tmp_path / 'f.db'}") as saver:
        meta = {"source": "input", "step": -1}
        with pytest.raises(
            UnserializableValueError, match=r"channel 'x'\['deep'\]\[1\]: a builtins:object"
        ):
            await saver.aput(CONFIG, checkpoint({"x": {"deep": [1, object()]}}), meta, {"x": 1})
        with pytest.raises(InvalidConfigError, match=r"config\['configurable'\]\['thread_id'\]"):
            await saver.aput({"configurable": {}}, checkpoint({}), meta, {})
        with pytest.raises(InvalidConfigError, match="metadata: not JSON"):
            await saver.aput(
                CONFIG, checkpoint({}), {"source": "input", "step": -1, "f": object()}, {}
            )  # type: ignore[typeddict-unknown-key]
        with pytest.raises(InvalidConfigError, match=r"checkpoint\['channel_versions'\]\['x'\]"):
            cp = checkpoint({"x": 1})
            cp["channel_versions"] = {"x": [1]}
            await saver.aput(CONFIG, cp, meta, {})
        with pytest.raises(InvalidConfigError, match=r"checkpoint_id'\]: missing"):
            await saver.aput_writes(CONFIG, [("x", 1)], "task")
        with pytest.raises(InvalidConfigError, match="strategy"):
            await saver.aprune(["t"], strategy="most")
        assert await saver.aget_tuple(CONFIG) is None
        assert await saver.store.ledger.names("langgraph/") == []
