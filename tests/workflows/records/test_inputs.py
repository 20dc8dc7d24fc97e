"""Canonical input JSON and the session-private `InputStore` (spec §4, checklist §12.28-§12.31)."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowledger import storage
from flowledger.storage import Store, open_store, validate_name
from flowledger.workflows.errors import (
    ConflictError,
    CorruptRecordError,
    InvalidInputError,
    NotFoundError,
)
from flowledger.workflows.records.inputs import (
    MAX_INPUT_DEPTH,
    MAX_INPUT_PROPERTIES,
    InputStore,
    canonical_json,
    check_input_document,
)
from flowledger.workflows.records.run import (
    MAX_INPUT_BYTES,
    InputReference,
    input_key,
    inputs_prefix,
)

SID = "a0000000-0000-4000-8000-000000000001"
OTHER_SID = "b0000000-0000-4000-8000-000000000001"
ZERO = "00000000-0000-0000-0000-000000000000"


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/w.db"
    async with open_store(url) as opened:
        yield opened


@pytest.fixture
def inputs(store: Store) -> InputStore:
    return InputStore(store.blobs)


def nested(depth: int) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for _ in range(depth - 1):
        doc = {"a": doc}
    return doc


# -- canonical_json ------------------------------------------------------------------------------


def test_canonical_json_spec_example() -> None:
    """§4.1: {"z":2,"a":1} -> {"a":1,"z":2} with the documented SHA-256."""
    data = canonical_json({"z": 2, "a": 1})
    assert data == b'{"a":1,"z":2}'
    assert (
        hashlib.sha256(data).hexdigest()
        == "99168216144c7fed5d4c54916cf98d9c66096280c04a499822a99b6658bd177a"
    )


def test_canonical_json_is_rfc8785() -> None:
    """DESIGN: JCS - keys by UTF-16 code units at every level (U+1F600 sorts before U+FF21),
    ECMAScript numbers, raw UTF-8."""
    doc = {
        "b": [3, {"y": 1.5, "x": None}],
        "\uff21": "€",
        "\U0001f600": True,
        "a": "line\n<tag>",
        "n": 1e21,
        "m": 1.0,
        "k": -0.0,
    }
    assert (
        canonical_json(doc)
        == (
            '{"a":"line\\n<tag>","b":[3,{"x":null,"y":1.5}],"k":0,"m":1,"n":1e+21,'
            '"\U0001f600":true,"\uff21":"€"}'
        ).encode()
    )


def test_canonical_json_decimal_rule() -> None:
    """inputs.canonical_json: Decimals are accepted iff their JCS double text is exact."""
    assert canonical_json({"a": Decimal("0.1"), "b": Decimal("1.00"), "c": Decimal("1E+2")}) == (
        b'{"a":0.1,"b":1,"c":100}'
    )
    assert canonical_json({"a": Decimal("0.1")}) == canonical_json({"a": 0.1})
    assert canonical_json({"big": 10**21}) == b'{"big":1e+21}'
    for bad in (
        Decimal("0.1000000000000000001"),
        Decimal("NaN"),
        Decimal("1e400"),
        2**53 + 1,
        2**60,
        10**5000,
        float("inf"),
        float("nan"),
    ):
        with pytest.raises(InvalidInputError) as info:
            canonical_json({"x": [bad]})
        assert info.value.field == "input"
        assert "$.x[0]" in str(info.value)


@pytest.mark.parametrize(
    "bad",
    [None, [1], "{}", b"{}", 3, {1: "int key"}, {"a": {1, 2}}, {"a": b"bytes"}, {"s": "\ud800"}],
)
def test_canonical_json_rejects_non_objects_and_non_json(bad: Any) -> None:
    """§4.1: only a JSON object of JSON values is accepted; the error is invalid-input."""
    with pytest.raises(InvalidInputError):
        canonical_json(bad)


def test_canonical_json_field_names_resume() -> None:
    """§0.1: the invalid-input error names its field (input or resume)."""
    with pytest.raises(InvalidInputError) as info:
        canonical_json([], field="resume")
    assert info.value.field == "resume"


def test_canonical_json_document_limits() -> None:
    """§1.4: depth 32 and 4096 keys are fine; depth 33, 4097 keys or > 256 KiB are refused."""
    assert canonical_json(nested(MAX_INPUT_DEPTH))
    with pytest.raises(InvalidInputError, match="nesting deeper than 32"):
        canonical_json(nested(MAX_INPUT_DEPTH + 1))
    with pytest.raises(InvalidInputError, match="nesting"):
        canonical_json({"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]})
    assert canonical_json({f"k{i}": i for i in range(MAX_INPUT_PROPERTIES)})
    with pytest.raises(InvalidInputError, match="4096"):
        canonical_json({"a": {f"k{i}": i for i in range(MAX_INPUT_PROPERTIES)}})
    fits = canonical_json({"s": "x" * (MAX_INPUT_BYTES - 8)})
    assert len(fits) == MAX_INPUT_BYTES
    with pytest.raises(InvalidInputError, match="262145 bytes"):
        canonical_json({"s": "x" * (MAX_INPUT_BYTES - 7)})


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=25,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=8)


def shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


@given(json_objects, st.randoms(use_true_random=False))
@settings(max_examples=300)
def test_property_key_order_does_not_matter(doc: dict[str, Any], rng: random.Random) -> None:
    """§4.1: equivalent documents with shuffled key order give identical bytes."""
    data = canonical_json(doc)
    assert canonical_json(shuffled(doc, rng)) == data
    assert json.loads(data, parse_int=float) == doc  # numbers are doubles
    check_input_document(data)  # what canonical_json makes, the store accepts
    assert canonical_json(json.loads(data)) == data  # idempotent


# -- check_input_document ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b"[]", "one JSON object"),
        (b"null", "one JSON object"),
        (b'"x"', "one JSON object"),
        (b'{"x":1} trailing', "one JSON object"),
        (b'{"x":1}{"y":2}', "one JSON object"),
        (b"}", "unbalanced"),
        (b'{"count":[1}', "one JSON object"),
        (b'{"a":NaN}', "one JSON object"),
        (b'{"a":1,"a":2}', "duplicate"),
        (b'{"a":"\xff"}', "one JSON object"),
        (b" " * MAX_INPUT_BYTES + b"{}", "262146 bytes"),
    ],
)
def test_check_input_document_rejects(data: bytes, message: str) -> None:
    """§1.4 / §4.2: bounded decode refuses bad documents cleanly with a plain error."""
    with pytest.raises(ValueError, match=message):
        check_input_document(data)


def test_check_input_document_bounds() -> None:
    """§1.4: depth 32 / 4096 keys pass; 33 / 4097 fail; brackets inside strings do not count."""
    check_input_document(json.dumps(nested(32)).encode())
    check_input_document(b'{"s":"' + b"[" * 100 + b'\\"{"}')
    with pytest.raises(ValueError, match="deeper than 32"):
        check_input_document(json.dumps(nested(33)).encode())
    check_input_document(json.dumps({f"k{i}": 1 for i in range(4096)}).encode())
    with pytest.raises(ValueError, match="4096"):
        check_input_document(json.dumps({"a": {f"k{i}": 1 for i in range(4096)}}).encode())
    check_input_document(b' \n{"a":1}\n ')


# -- InputStore ----------------------------------------------------------------------------------


def test_input_store_requires_blobs() -> None:
    """§4.2 step 1: the store must be initialised with Blobs."""
    with pytest.raises(TypeError):
        InputStore(None)  # type: ignore[arg-type]


async def test_put_returns_reference_and_copies(store: Store, inputs: InputStore) -> None:
    """§12.28: 64-hex digest, exact size, key = prefix + digest (a valid storage name); caller
    mutation after put and mutation of returned bytes do not affect storage; the blob listing
    under the prefix shows exactly that key."""
    buffer = bytearray(b'{"count":1}')
    ref = await inputs.put(SID, buffer)  # type: ignore[arg-type]
    assert ref.digest == hashlib.sha256(b'{"count":1}').hexdigest()
    assert len(ref.digest) == 64
    assert ref.size == len(buffer) == 11
    prefix = f"sessions/{SID}/workflows/inputs/sha256/"
    assert ref.key == prefix + ref.digest == input_key(SID, ref.digest)
    assert inputs_prefix(SID) == prefix
    assert validate_name(ref.key) == ref.key
    buffer[:] = b'{"count":9}'
    got = await inputs.get(SID, ref)
    assert got == b'{"count":1}'
    copy = bytearray(got)
    copy[0:1] = b"["
    assert await inputs.get(SID, ref) == b'{"count":1}'
    assert await store.blobs.list(prefix) == [ref.key]
    assert await store.blobs.list() == [ref.key]


async def test_put_stores_exact_bytes(inputs: InputStore) -> None:
    """§4.2 step 4: the store does not re-canonicalise; the digest is of the bytes given."""
    data = b'{ "z": 2, "a": 1 }'
    ref = await inputs.put(SID, data)
    assert ref.digest == hashlib.sha256(data).hexdigest()
    assert await inputs.get(SID, ref) == data


async def test_put_is_idempotent_and_session_private(store: Store, inputs: InputStore) -> None:
    """§12.29: identical bytes give identical references; another session's Get is not found."""
    first = await inputs.put(SID, b'{"a":1}')
    second = await inputs.put(SID, b'{"a":1}')
    assert first == second
    with pytest.raises(NotFoundError) as info:
        await inputs.get(OTHER_SID, first)
    assert (info.value.kind, info.value.session_id, info.value.digest) == (
        "input",
        OTHER_SID,
        first.digest,
    )
    theirs = await inputs.put(OTHER_SID, b'{"a":1}')
    assert theirs.digest == first.digest and theirs.key != first.key
    assert await store.blobs.list() == sorted([first.key, theirs.key])


async def test_put_conflicting_bytes_under_digest_key(store: Store, inputs: InputStore) -> None:
    """§4.2 step 6: different bytes already under the digest key are a typed conflict."""
    data = b'{"a":1}'
    key = input_key(SID, hashlib.sha256(data).hexdigest())
    await store.blobs.put(key, b'{"a":2}')
    with pytest.raises(ConflictError) as info:
        await inputs.put(SID, data)
    assert info.value.reason == "digest-addressed input blob contains different bytes"
    assert info.value.session_id == SID


async def test_get_detects_wrong_size_and_tampering(store: Store, inputs: InputStore) -> None:
    """§12.30: a wrong size in the reference and a tampered blob (digest mismatch) are corrupt."""
    ref = await inputs.put(SID, b'{"a":1}')
    with pytest.raises(CorruptRecordError, match="size does not match"):
        await inputs.get(SID, InputReference(ref.digest, ref.key, ref.size + 1))
    tampered = b'{"b":1}'
    fake = hashlib.sha256(b"something else").hexdigest()
    await store.blobs.put(input_key(SID, fake), tampered)
    with pytest.raises(CorruptRecordError, match="digest does not match") as info:
        await inputs.get(SID, InputReference(fake, input_key(SID, fake), len(tampered)))
    assert info.value.key == input_key(SID, fake)


@pytest.mark.parametrize(
    "ref",
    [
        InputReference("ABC", f"sessions/{SID}/workflows/inputs/sha256/ABC", 7),
        InputReference("0" * 64, f"sessions/{SID}/workflows/inputs/sha256/" + "1" * 64, 7),
        InputReference("0" * 64, f"sessions/{SID}/workflows/inputs/sha256/" + "0" * 64, 0),
        InputReference(
            "0" * 64, f"sessions/{SID}/workflows/inputs/sha256/" + "0" * 64, MAX_INPUT_BYTES + 1
        ),
    ],
    ids=["malformed digest", "key differs", "size 0", "size too big"],
)
async def test_get_rejects_malformed_references(inputs: InputStore, ref: InputReference) -> None:
    """§4.3 step 3: malformed digest, mismatched key or out-of-range size is corrupt."""
    with pytest.raises(CorruptRecordError) as info:
        await inputs.get(SID, ref)
    assert info.value.key == ref.key


async def test_get_missing_blob_is_not_found(inputs: InputStore) -> None:
    """§4.3 step 4: a valid reference to an absent blob is not found (kind input)."""
    digest = hashlib.sha256(b"{}").hexdigest()
    with pytest.raises(NotFoundError) as info:
        await inputs.get(SID, InputReference(digest, input_key(SID, digest), 2))
    assert info.value.kind == "input"


@pytest.mark.parametrize(
    ("session_id", "data", "message"),
    [
        (ZERO, b'{"a":1}', "session ID is required"),
        (None, b'{"a":1}', "session ID is required"),
        (SID, b"", "empty"),
        (SID, b"not json", "one JSON object"),
        (SID, b'{"x":1} trailing', "one JSON object"),
        (SID, b"[1,2]", "one JSON object"),
        (SID, b'{"s":"' + b"x" * MAX_INPUT_BYTES + b'"}', "limit is 262144"),
    ],
    ids=["zero session", "no session", "empty", "not json", "trailing", "array", "over 256 KiB"],
)
async def test_put_rejects(
    store: Store, inputs: InputStore, session_id: Any, data: bytes, message: str
) -> None:
    """§12.31: Put rejects a zero session, empty input, non-JSON/trailing input and input over
    256 KiB, writing nothing."""
    with pytest.raises(ValueError, match=message):
        await inputs.put(session_id, data)
    assert await store.blobs.list() == []


async def test_put_accepts_exactly_max_bytes(inputs: InputStore) -> None:
    """§4.2 step 2: 262144 bytes is within the limit."""
    data = b'{"s":"' + b"x" * (MAX_INPUT_BYTES - 8) + b'"}'
    assert len(data) == MAX_INPUT_BYTES
    ref = await inputs.put(SID, data)
    assert ref.size == MAX_INPUT_BYTES
    assert await inputs.get(SID, ref) == data


async def test_get_rejects_key_outside_session_prefix(inputs: InputStore) -> None:
    """§12.31: a reference whose key lies outside this session's prefix is not found."""
    ref = await inputs.put(SID, b'{"a":1}')
    outside = [
        InputReference(ref.digest, f"sessions/{OTHER_SID}/workflows/inputs/sha256/{ref.digest}", 7),
        InputReference(ref.digest, f"flow/{ref.digest}", 7),
        InputReference(ref.digest, f"sessions/{SID}/workflows/runs/{ref.digest}", 7),
    ]
    for bad in outside:
        with pytest.raises(NotFoundError):
            await inputs.get(SID, bad)
    with pytest.raises(ValueError, match="session ID is required"):
        await inputs.get(ZERO, ref)


class FailingBlobs:
    async def put(self, key: str, data: bytes) -> None:
        raise OSError("bucket unavailable")

    async def get(self, key: str) -> bytes:
        raise OSError("bucket unavailable")

    async def delete(self, key: str) -> None:
        raise OSError("bucket unavailable")

    async def list(self, prefix: str = "") -> list[str]:
        raise OSError("bucket unavailable")


async def test_other_storage_errors_propagate() -> None:
    """§11.4: storage errors other than not-found propagate so callers can retry them."""
    assert isinstance(FailingBlobs(), storage.Blobs)
    inputs = InputStore(FailingBlobs())
    with pytest.raises(OSError, match="bucket unavailable"):
        await inputs.put(SID, b'{"a":1}')
    digest = hashlib.sha256(b'{"a":1}').hexdigest()
    with pytest.raises(OSError, match="bucket unavailable"):
        await inputs.get(SID, InputReference(digest, input_key(SID, digest), 7))
