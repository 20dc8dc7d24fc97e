"""`Encoder.small`: None, booleans and small integers stored without a call to the serde,
in exactly the form `Encoder.scalar` gives them; any other serde sees every value."""

from __future__ import annotations

from typing import Any

import pytest

from flowledger.integrations.langgraph import FlowledgerSaver, JsonSerializer
from flowledger.integrations.langgraph.values import Encoded, Encoder

from ._checkpoints import CONFIG

SMALL = [None, True, False, 0, 1, -1, 10**18 - 1, -(10**18) + 1]
NOT_SMALL = [10**18, -(10**18), 10**400, 1.5, "x", b"x", [1], {"a": 1}, (1,)]


@pytest.mark.parametrize("value", SMALL, ids=repr)
def test_small_is_what_scalar_stores(value: Any) -> None:
    encoder = Encoder(JsonSerializer())
    out = Encoded()
    assert encoder.small(value) == encoder.scalar(value, "here", out)
    assert out.blobs == {} and out.needed == set()


@pytest.mark.parametrize("value", NOT_SMALL, ids=lambda v: type(v).__name__)
def test_other_values_go_to_the_serde(value: Any) -> None:
    assert Encoder(JsonSerializer()).small(value) is None


class Counting(JsonSerializer):
    """Another serde (a subclass may write other bytes): it must see every value."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        self.seen.append(obj)
        return super().dumps_typed(obj)


def test_another_serde_sees_every_value() -> None:
    serde = Counting()
    encoder = Encoder(serde)
    for value in SMALL:
        assert encoder.small(value) is None
        encoder.scalar(value, "here", Encoded())
    assert serde.seen == SMALL


async def test_a_graphs_small_values_read_back_through_either_serde(tmp_path: Any) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    values = {"n": 41, "flag": True, "none": None, "big": 10**30}
    for serde in (JsonSerializer(), Counting()):
        url = f"sqlite:///{tmp_path / (type(serde).__name__ + '.db')}"
        async with FlowledgerSaver.from_url(url, serde=serde) as saver:
            cp: dict[str, Any] = dict(empty_checkpoint())
            cp["channel_values"] = values
            cp["channel_versions"] = dict.fromkeys(values, 1)
            config = await saver.aput(CONFIG, cp, {"source": "input", "step": -1}, {})  # type: ignore[arg-type]
            await saver.aput_writes(config, [("n", 42), ("flag", False)], "task")
            got = await saver.aget_tuple(config)
            assert got is not None
            assert got.checkpoint["channel_values"] == values
            assert sorted((c, v) for _, c, v in got.pending_writes or []) == [
                ("flag", False),
                ("n", 42),
            ]
        if isinstance(serde, Counting):
            assert {41, True, None, 42, False} <= {v for v in serde.seen if not isinstance(v, dict)}
