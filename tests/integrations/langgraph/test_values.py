"""`Encoder`: list elements remembered between checkpoints are stored exactly as a fresh
encoding would store them, however the list or its elements change."""

from __future__ import annotations

import random
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from flowledger.integrations.langgraph import JsonSerializer
from flowledger.integrations.langgraph.values import Encoded, Encoder, load_scalar

SLOT = ("log", "messages")


def _fresh(values: list[Any]) -> list[Any]:
    return Encoder(JsonSerializer()).elements(values, "values", Encoded())


def _stored(encoder: Encoder, values: list[Any]) -> tuple[list[Any], dict[str, bytes]]:
    out = Encoded()
    entries = encoder.elements(values, "values", out, slot=SLOT)
    return entries, out.blobs


def _read(encoder: Encoder, entries: list[Any], blobs: dict[str, bytes]) -> list[Any]:
    """What a read returns (new objects), remembered as the saver's reader does."""
    items = [load_scalar(encoder.serde, entry, blobs, "read") for entry in entries]
    encoder.remember(SLOT, items, entries, blobs)
    return items


def _change(pick: random.Random, values: list[Any], turn: int) -> list[Any]:
    """One of the ways a list of a channel changes between checkpoints."""
    models = [v for v in values if isinstance(v, BaseMessage)]
    kind = pick.randrange(12)
    if kind < 3 or not models:  # grows (the commonest: a conversation)
        return [*values, AIMessage(content=f"answer {turn}", id=f"a{turn}")]
    if kind == 3:
        return [*values, f"a string {turn}"]
    if kind == 4:
        pick.choice(models).content = f"edited in place {turn}"
    elif kind == 5:
        pick.choice(models).additional_kwargs.setdefault("notes", []).append(turn)
    elif kind == 6:
        pick.choice(models).response_metadata["turn"] = turn
    elif kind == 7:
        return values[1:]  # the first one removed
    elif kind == 8:
        return [*values, pick.choice(values)]  # the same object twice
    elif kind == 9:
        shuffled = list(values)
        pick.shuffle(shuffled)
        return shuffled
    elif kind == 10:
        return [*values, {"a": "plain dict", "turn": turn}]  # not remembered
    else:
        at = values.index(pick.choice(models))
        copy = values[at].model_copy(deep=True)
        return [*values[:at], copy, *values[at + 1 :]]
    return values


def test_remembered_elements_are_stored_as_a_fresh_encoding_would_store_them() -> None:
    pick = random.Random(7)
    for _ in range(20):
        encoder = Encoder(JsonSerializer())
        values: list[Any] = [HumanMessage(content="hello", id="h0")]
        for turn in range(40):
            entries, blobs = _stored(encoder, values)
            assert entries == _fresh(values)
            for entry in entries:
                if isinstance(entry, str):
                    assert entry in blobs  # every attachment is at hand to store
            if pick.randrange(4) == 0:
                values = _read(encoder, entries, blobs)
            values = _change(pick, values, turn)


def test_a_message_read_back_and_changed_in_place_is_stored_again() -> None:
    """A read's new objects stand for the list remembered before; one of them changed in
    place afterwards is stored again, not as it was read."""
    encoder = Encoder(JsonSerializer())
    first = [HumanMessage(content="q", id="h"), AIMessage(content="a", id="a")]
    entries, blobs = _stored(encoder, first)
    again = _read(encoder, entries, blobs)
    assert [m is n for m, n in zip(again, first, strict=True)] == [False, False]
    assert _stored(encoder, again)[0] == entries
    again[0].content = "q, edited"
    again[1].additional_kwargs["k"] = {"nested": [1]}
    assert _stored(encoder, again)[0] == _fresh(again) != entries
    again[1].additional_kwargs["k"]["nested"].append(2)  # nested, in place
    assert _stored(encoder, [*again, "x"])[0] == _fresh([*again, "x"])
