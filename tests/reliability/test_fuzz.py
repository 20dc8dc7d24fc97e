"""Property-based fuzzing of what the existing suites leave open: the whole checkpoint log
decode (records + attachments through `LedgerCheckpointStore`), canonical JSON, schema
compilation and input / resume validation. Every bad input raises the layer's typed error;
nothing else escapes. (Run-record decode and random tool calls are fuzzed in
``tests/workflows/records/test_run.py`` and ``tests/tools/test_properties.py``.)"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flowledger import flow
from flowledger.workflows.authoring.schema import compile_schema
from flowledger.workflows.errors import InvalidInputError, InvalidSchemaError
from flowledger.workflows.records.inputs import canonical_json, check_input_document
from flowledger.workflows.runtime.catalog import Catalog
from tests.workflows.conftest import COUNTER_SCHEMA, Gates, counter_definition

from ._decode_target import RECORDS, decode_log

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=2)
)
json_like = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


# -- checkpoint log decode ------------------------------------------------------------------


@st.composite
def mangled_records(draw: st.DrawFn) -> bytes:
    """A real checkpoint record with bytes flipped, cut, inserted or a JSON node replaced."""
    mode = draw(st.integers(0, 255))
    record = bytearray(RECORDS[draw(st.integers(0, len(RECORDS) - 1))])
    action = draw(st.sampled_from(["flip", "cut", "insert", "node", "raw"]))
    if action == "raw":
        return bytes([mode]) + draw(st.binary(min_size=1, max_size=200))
    if action == "node":
        doc = json.loads(record)
        node: Any = doc
        path = []
        while isinstance(node, dict | list) and node and draw(st.booleans()):
            key = (
                draw(st.sampled_from(sorted(node)))
                if isinstance(node, dict)
                else draw(st.integers(0, len(node) - 1))
            )
            path.append((node, key))
            node = node[key]
        if path:
            parent, key = path[-1]
            if draw(st.booleans()) and isinstance(parent, dict):
                del parent[key]
            else:
                parent[key] = draw(json_like)
        else:
            doc["extra"] = draw(json_like)
        try:
            return bytes([mode]) + json.dumps(doc, allow_nan=True).encode("utf-8", "surrogatepass")
        except (ValueError, UnicodeEncodeError):
            return bytes([mode]) + bytes(record)
    position = draw(st.integers(0, len(record) - 1))
    if action == "flip":
        record[position] ^= draw(st.integers(1, 255))
    elif action == "cut":
        del record[position:]
        if not record:
            record = bytearray(b"{")
    else:
        record[position:position] = draw(st.binary(min_size=1, max_size=8))
    return bytes([mode]) + bytes(record)


@SETTINGS
@given(mangled_records())
# Found by this test: a list inside "same" raised TypeError (unhashable) from the decoder.
@example(
    b'\x04{"checkpoint": {"frontier": ["ask"], "interrupts": [{"info": {"question": "more?"}, '
    b'"kind": 0, "vertex": "ask"}], "phase": 1, "run": {"interrupted_at": 1796152342792713, '
    b'"status": 2, "step": 1, "updated_at": 1796152342792715}}, "revision": 4, '
    b'"same": [[], "step_base", "vertices"]}'
)
def test_checkpoint_log_decode_raises_only_flow_errors(data: bytes) -> None:
    """Arbitrary or mangled checkpoint records, alone or inside a real run's log, decode or
    raise a flow error (`StoreError` wrapping the decode error, `CheckpointDecodeError`,
    ...) - never anything else."""
    decode_log(data)


def test_real_log_decodes() -> None:
    """The fuzz target's seed log is valid (so mutations start from a real checkpoint)."""
    import asyncio

    from ._decode_target import ATTACHMENTS, RUN_ID, _decode

    asyncio.run(_decode(list(RECORDS), ATTACHMENTS))
    assert len(RECORDS) >= 5 and ATTACHMENTS
    assert flow.FlowError is not None and RUN_ID


# -- canonical JSON -------------------------------------------------------------------------


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


@SETTINGS
@given(st.dictionaries(st.text(max_size=8), json_like, max_size=5) | json_like)
def test_canonical_json_is_idempotent_or_refused(value: Any) -> None:
    """canonical_json either refuses with `InvalidInputError` or returns bytes that are a
    valid input document, parse back to an equal value and are their own canonical form."""
    try:
        data = canonical_json(value)
    except InvalidInputError:
        return
    assert isinstance(value, dict) and _finite(value)
    check_input_document(data)
    parsed = json.loads(data)
    assert canonical_json(parsed) == data
    assert _numbers_as_floats(parsed) == _numbers_as_floats(value)


def _numbers_as_floats(value: Any) -> Any:
    """JCS writes 1e16 as 10000000000000000: compare numbers by their double value."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list):
        return [_numbers_as_floats(v) for v in value]
    return {k: _numbers_as_floats(v) for k, v in value.items()}


# -- schemas and inputs ---------------------------------------------------------------------


@st.composite
def schemas(draw: st.DrawFn) -> bytes:
    base: dict[str, Any] = json.loads(json.dumps(COUNTER_SCHEMA))
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return draw(st.binary(max_size=200))
    if choice == 1:
        base[draw(st.text(max_size=12))] = draw(json_like)
    elif choice == 2:
        base["properties"]["count"][draw(st.text(max_size=12))] = draw(json_like)
    else:
        base = draw(st.dictionaries(st.text(max_size=8), json_like, max_size=5))
    try:
        return json.dumps(base, allow_nan=True).encode("utf-8", "surrogatepass")
    except (ValueError, UnicodeEncodeError):
        return b"{}"


@SETTINGS
@given(schemas())
def test_schema_compilation_refuses_only_with_invalid_schema(raw: bytes) -> None:
    """Arbitrary and mutated schemas compile or raise `InvalidSchemaError`."""
    try:
        compiled = compile_schema(raw, "input_schema")
    except InvalidSchemaError:
        return
    assert compiled is not None


_CATALOG = Catalog()
DEFINITION = _CATALOG.register(counter_definition(flow.MemoryCheckpointStore(), Gates()))
ASKER = _CATALOG.register(
    counter_definition(flow.MemoryCheckpointStore(), Gates(), interrupting=True)
)


@SETTINGS
@given(
    st.binary(max_size=200)
    | st.builds(
        lambda v: json.dumps(v, allow_nan=True).encode("utf-8", "surrogatepass"), json_like
    ).filter(lambda b: True)
    | st.builds(lambda n: json.dumps({"count": n}).encode(), st.integers(-(2**70), 2**70))
)
def test_input_and_resume_validation_refuse_only_with_invalid_input(raw: bytes) -> None:
    """Arbitrary bytes and JSON values are accepted by the schemas or refused with
    `InvalidInputError` - for the input of `counter` and the resume payload of `asker`."""
    for validate in (DEFINITION.validate_input, ASKER.validate_resume):
        with contextlib.suppress(InvalidInputError):
            validate(raw)


@pytest.mark.parametrize("raw", [b'{"count": 1}', '{"count": 0}'])
def test_valid_inputs_pass(raw: bytes | str) -> None:
    assert DEFINITION.validate_input(raw) is not None
