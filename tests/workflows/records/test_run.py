"""The run record: status table, key layout, validation and the strict codec (spec §3)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowledger.storage import validate_name
from flowledger.workflows.errors import CorruptRecordError
from flowledger.workflows.records.run import (
    DEFAULT_RUN_PAGE_SIZE,
    MAX_ARTIFACT_REFERENCES,
    MAX_INPUT_BYTES,
    MAX_RUN_PAGE_SIZE,
    MAX_RUN_RECORD_BYTES,
    RUN_RECORD_VERSION,
    ArtifactReference,
    InputReference,
    Run,
    RunStatus,
    can_transition,
    decode_run,
    encode_run,
    input_key,
    inputs_prefix,
    is_id,
    owner_lease_name,
    run_key,
    runs_prefix,
    validate_run,
)

ZERO = "00000000-0000-0000-0000-000000000000"
SID = "3f1c2b4a-0000-4000-8000-000000000001"
RID = "3f1c2b4a-0000-4000-8000-000000000002"
TOOL = "3f1c2b4a-0000-4000-8000-000000000003"
GRAPH = "3f1c2b4a-0000-4000-8000-000000000004"
T0 = datetime(2026, 8, 10, 16, 0, 0, 123456, tzinfo=UTC)
DIGEST = hashlib.sha256(b'{"count":1}').hexdigest()
KEY = "sessions/x/workflows/runs/y"


def make_run(**changes: Any) -> Run:
    session_id = changes.get("session_id", SID)
    run_id = changes.get("id", RID)
    key_session = session_id if is_id(session_id) else SID
    base = Run(
        session_id=session_id,
        tool_execution_id=TOOL,
        definition_name="counter",
        definition_version="v1",
        id=run_id,
        graph_run_id=GRAPH,
        input=InputReference(DIGEST, input_key(key_session, DIGEST), 11),
        ledger_locator="flow/runs/abc",
        created_at=T0,
        updated_at=T0,
        artifact_session_id=session_id,
        artifact_run_id=run_id,
    )
    return dataclasses.replace(base, **changes)


def envelope(run: Run) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(encode_run(run))
    return doc


def raw(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


# -- constants and statuses ----------------------------------------------------------------------


def test_constants_match_spec() -> None:
    """§3.1: the documented limits."""
    assert (MAX_RUN_RECORD_BYTES, MAX_ARTIFACT_REFERENCES) == (65536, 128)
    assert (MAX_RUN_PAGE_SIZE, DEFAULT_RUN_PAGE_SIZE) == (100, 50)
    assert (MAX_INPUT_BYTES, RUN_RECORD_VERSION) == (262144, 2)


def test_status_values_and_terminal() -> None:
    """§3.4: six statuses; completed, cancelled and failed are terminal."""
    assert [s.value for s in RunStatus] == [
        "pending",
        "running",
        "interrupted",
        "completed",
        "cancelled",
        "failed",
    ]
    assert {s for s in RunStatus if s.terminal} == {
        RunStatus.COMPLETED,
        RunStatus.CANCELLED,
        RunStatus.FAILED,
    }


# The §3.4 table, row = from, columns in RunStatus order (P R I C X F).
TABLE = {
    "pending": "YYNNYY",
    "running": "NYYYYY",
    "interrupted": "NYYNYY",
    "completed": "NNNYNN",
    "cancelled": "NNNNYN",
    "failed": "NNNNNY",
}
PAIRS = [(a, b) for a in RunStatus for b in RunStatus]


@pytest.mark.parametrize(("current", "target"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_can_transition_all_36_pairs(current: RunStatus, target: RunStatus) -> None:
    """§12.20: every (from, to) pair of the §3.4 table, including self-transitions."""
    expected = TABLE[current.value][list(RunStatus).index(target)] == "Y"
    assert can_transition(current, target) is expected


def test_can_transition_rejects_non_status_values() -> None:
    """§3.4: only members of RunStatus are legal endpoints."""
    assert not can_transition(RunStatus.RUNNING, "bogus")  # type: ignore[arg-type]
    assert not can_transition("pending", RunStatus.RUNNING)  # type: ignore[arg-type]


# -- keys ----------------------------------------------------------------------------------------


def test_key_layout() -> None:
    """§3.5 / §12.23: the key layout; every key and prefix is a valid storage name."""
    assert run_key(SID, RID) == f"sessions/{SID}/workflows/runs/{RID}"
    assert runs_prefix(SID) == f"sessions/{SID}/workflows/runs/"
    assert input_key(SID, DIGEST) == f"sessions/{SID}/workflows/inputs/sha256/{DIGEST}"
    assert inputs_prefix(SID) == f"sessions/{SID}/workflows/inputs/sha256/"
    assert owner_lease_name(SID) == f"sessions/{SID}/workflows/owner"
    for name in (run_key(SID, RID), input_key(SID, DIGEST), owner_lease_name(SID)):
        assert validate_name(name) == name
    for prefix in (runs_prefix(SID), inputs_prefix(SID)):
        assert validate_name(prefix[:-1]) == prefix[:-1]


@pytest.mark.parametrize("bad", [None, "", ZERO, "not-a-uuid", SID.upper(), SID + "/x"])
def test_keys_reject_missing_or_malformed_ids(bad: Any) -> None:
    """§12.23: zero/absent session or run IDs are rejected before key construction."""
    with pytest.raises(ValueError, match="session ID is required"):
        run_key(bad, RID)
    with pytest.raises(ValueError, match="session ID is required"):
        runs_prefix(bad)
    with pytest.raises(ValueError, match="session ID is required"):
        inputs_prefix(bad)
    with pytest.raises(ValueError, match="session ID is required"):
        input_key(bad, DIGEST)
    with pytest.raises(ValueError, match="session ID is required"):
        owner_lease_name(bad)
    with pytest.raises(ValueError, match="workflow run ID is required"):
        run_key(SID, bad)


@pytest.mark.parametrize("bad", ["", "abc", DIGEST.upper(), DIGEST[:-1], DIGEST + "0"])
def test_input_key_rejects_malformed_digest(bad: str) -> None:
    """§3.5: the input key needs a 64-lowercase-hex digest."""
    with pytest.raises(ValueError, match="64 lowercase hex"):
        input_key(SID, bad)


# -- validation ----------------------------------------------------------------------------------

OTHER = "3f1c2b4a-0000-4000-8000-00000000000f"
ART = ArtifactReference("report", "markdown", DIGEST, 10)

INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("zero session", {"session_id": ZERO}, "session ID is required"),
    ("no tool execution", {"tool_execution_id": ""}, "tool execution ID is required"),
    ("zero tool execution", {"tool_execution_id": ZERO}, "tool execution ID is required"),
    ("zero run", {"id": ZERO}, "workflow run ID is required"),
    ("zero graph run", {"graph_run_id": ZERO}, "graph run ID is required"),
    ("upper-case graph run", {"graph_run_id": OTHER.upper()}, "graph run ID is required"),
    ("zero parent", {"parent_run_id": ZERO}, "parent_run_id"),
    ("no artifact session", {"artifact_session_id": None}, "artifact session ID is required"),
    ("no artifact run", {"artifact_run_id": None}, "artifact run ID is required"),
    ("unknown artifact kind", {"artifact_input_kind": "sibling"}, "artifact_input_kind"),
    ("ids without kind", {"artifact_input_session_id": OTHER}, "must be absent"),
    (
        "kind without ids",
        {"artifact_input_kind": "parent", "artifact_input_run_id": OTHER},
        "requires both",
    ),
    ("name with slash", {"definition_name": "../policy"}, "single storage-name segment"),
    ("empty name", {"definition_name": ""}, "definition_name"),
    ("upper-case version", {"definition_version": "V1"}, "definition_version"),
    ("plain status string", {"status": "running"}, "status must be a RunStatus"),
    ("long summary", {"status_summary": "é" * 513}, "1026 bytes"),
    ("surrogate summary", {"status_summary": "\ud800"}, "status_summary"),
    ("cancel not bool", {"cancel_requested": 1}, "cancel_requested"),
    ("negative checkpoint", {"checkpoint_revision": -1}, "checkpoint_revision"),
    ("bool cursor", {"activity_cursor": True}, "activity_cursor"),
    ("huge cursor", {"activity_cursor": 1 << 64}, "activity_cursor"),
    ("negative revision", {"revision": -1}, "revision"),
    ("bad digest", {"input": InputReference("abc", "x", 1)}, "input digest"),
    (
        "foreign input key",
        {"input": InputReference(DIGEST, input_key(OTHER, DIGEST), 11)},
        "input key",
    ),
    ("empty input", {"input": InputReference(DIGEST, input_key(SID, DIGEST), 0)}, "input size"),
    (
        "huge input",
        {"input": InputReference(DIGEST, input_key(SID, DIGEST), MAX_INPUT_BYTES + 1)},
        "input size",
    ),
    ("bad locator", {"ledger_locator": "flow//runs"}, "ledger_locator"),
    ("naive created_at", {"created_at": datetime(2026, 1, 1)}, "created_at must be in UTC"),
    (
        "offset updated_at",
        {"updated_at": T0.astimezone(timezone(timedelta(hours=1)))},
        "updated_at must be in UTC",
    ),
    ("year 1999", {"created_at": datetime(1999, 12, 31, tzinfo=UTC)}, "created_at year 1999"),
    ("updated before created", {"updated_at": T0 - timedelta(microseconds=1)}, "before"),
    ("artifacts list", {"artifacts": [ART]}, "tuple"),
    ("too many artifacts", {"artifacts": (ART,) * 129}, "129 artifacts"),
    ("duplicate artifact", {"artifacts": (ART, dataclasses.replace(ART, kind="b"))}, "more than"),
    (
        "artifact id slash",
        {"artifacts": (dataclasses.replace(ART, id="a/b"),)},
        r"artifacts\[0\]\.id",
    ),
    ("artifact digest", {"artifacts": (dataclasses.replace(ART, digest="x"),)}, "digest"),
    ("artifact size", {"artifacts": (dataclasses.replace(ART, size=-1),)}, r"artifacts\[0\]\.size"),
    ("trace_parent text", {"trace_parent": "not a traceparent"}, "trace_parent"),
    ("trace_parent upper", {"trace_parent": "00-" + "A" * 32 + "-" + "b" * 16 + "-01"}, "W3C"),
    ("trace_parent version", {"trace_parent": "01-" + "a" * 32 + "-" + "b" * 16 + "-01"}, "W3C"),
]


@pytest.mark.parametrize(
    ("changes", "message"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_validate_run_rejects(changes: dict[str, Any], message: str) -> None:
    """§3.3 / §12.24: each validation rule refuses its violation with a clear ValueError."""
    run = make_run(**changes)
    with pytest.raises(ValueError, match=message):
        validate_run(run)
    with pytest.raises(ValueError, match=message):
        encode_run(run)


def test_validate_run_accepts_full_record() -> None:
    """§3.3: a record using every optional field is valid."""
    run = make_run(
        parent_run_id=OTHER,
        artifact_input_kind="bootstrap",
        artifact_input_session_id=OTHER,
        artifact_input_run_id=OTHER,
        status=RunStatus.INTERRUPTED,
        status_summary="s" * 1024,
        cancel_requested=True,
        checkpoint_revision=7,
        activity_cursor=7,
        artifacts=tuple(ArtifactReference(f"a{i}", "k", DIGEST, i) for i in range(128)),
        updated_at=T0 + timedelta(days=1),
    )
    validate_run(run)


# -- codec ---------------------------------------------------------------------------------------


def test_encode_is_compact_json_with_omissions() -> None:
    """§3.6 / §3.2 / §12.25: compact JSON envelope; empty optional fields omitted; no revision."""
    run = make_run(revision=9)
    data = encode_run(run)
    doc = json.loads(data)
    assert b" " not in data
    assert doc["version"] == 2
    assert list(doc) == ["version", "run"]
    assert set(doc["run"]) == {
        "session_id",
        "tool_execution_id",
        "definition_name",
        "definition_version",
        "id",
        "graph_run_id",
        "artifact_session_id",
        "artifact_run_id",
        "input",
        "status",
        "checkpoint_revision",
        "activity_cursor",
        "ledger_locator",
        "created_at",
        "updated_at",
    }
    assert doc["run"]["created_at"] == "2026-08-10T16:00:00.123456Z"
    assert doc["run"]["input"] == {"digest": DIGEST, "key": input_key(SID, DIGEST), "size": 11}
    assert b'revision":9' not in data


def test_encode_includes_set_optional_fields() -> None:
    """§3.2: optional fields appear once set."""
    run = make_run(
        parent_run_id=OTHER,
        artifact_input_kind="parent",
        artifact_input_session_id=OTHER,
        artifact_input_run_id=OTHER,
        status_summary="half way",
        cancel_requested=True,
        artifacts=(ART,),
        updated_at=datetime(2027, 1, 1, tzinfo=UTC),
    )
    body = envelope(run)["run"]
    assert body["parent_run_id"] == OTHER
    assert body["artifact_input_kind"] == "parent"
    assert body["status_summary"] == "half way"
    assert body["cancel_requested"] is True
    assert body["artifacts"] == [{"id": "report", "kind": "markdown", "digest": DIGEST, "size": 10}]
    assert body["updated_at"] == "2027-01-01T00:00:00.000000Z"
    assert decode_run(KEY, encode_run(run)) == run


def test_encode_refuses_oversized_record() -> None:
    """§3.6: a record over 65536 bytes is a plain error."""
    big = tuple(ArtifactReference(f"a{i}-" + "x" * 400, "k", DIGEST, i) for i in range(128))
    with pytest.raises(ValueError, match="run record exceeds 65536 bytes"):
        encode_run(make_run(artifacts=big))


def test_decode_round_trip_resets_revision() -> None:
    """§3.6: the revision is not stored, so a decoded record has revision 0."""
    run = make_run(revision=5, status=RunStatus.RUNNING)
    decoded = decode_run(KEY, encode_run(run))
    assert decoded == dataclasses.replace(run, revision=0)
    assert decoded.created_at.tzinfo is UTC
    assert isinstance(decoded.status, RunStatus)
    assert isinstance(decoded.artifacts, tuple)


TRACE_PARENT = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"


def test_trace_parent_is_stored_only_when_set_and_round_trips() -> None:
    """The run's trace context (observability.tracing): absent from records without one."""
    assert "trace_parent" not in json.loads(encode_run(make_run()))["run"]
    run = make_run(trace_parent=TRACE_PARENT)
    assert json.loads(encode_run(run))["run"]["trace_parent"] == TRACE_PARENT
    assert decode_run(KEY, encode_run(run)) == run


def _mutate(path: list[str], value: Any, *, delete: bool = False) -> bytes:
    doc: Any = envelope(make_run())
    target = doc
    for part in path[:-1]:
        target = target[part]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return raw(doc)


_DELETE = object()
CORRUPT: list[tuple[Any, ...]] = [
    ("empty", b""),
    ("not bytes", "{}"),
    ("not json", b"{nope"),
    ("not utf-8", b'{"version":2,"run":"\xff"}'),
    ("not object", b"[2]"),
    ("unknown envelope field", ["extra"], 1),
    ("unknown run field", ["run", "extra"], 1),
    ("unknown input field", ["run", "input", "extra"], 1),
    ("version 99", ["version"], 99),
    ("version 1", ["version"], 1),
    ("version string", ["version"], "2"),
    ("version bool", ["version"], True),
    ("version float", ["version"], 2.0),
    ("no version", ["version"], _DELETE),
    ("no artifact session", ["run", "artifact_session_id"], _DELETE),
    ("no artifact run", ["run", "artifact_run_id"], _DELETE),
    ("no checkpoint revision", ["run", "checkpoint_revision"], _DELETE),
    ("unknown status", ["run", "status"], "paused"),
    ("non-UTC offset", ["run", "created_at"], "2026-08-10T17:00:00.123456+01:00"),
    ("+00:00 offset", ["run", "created_at"], "2026-08-10T16:00:00.123456+00:00"),
    ("nanoseconds", ["run", "created_at"], "2026-08-10T16:00:00.123456789Z"),
    ("bad date", ["run", "created_at"], "2026-02-30T16:00:00Z"),
    ("updated before created", ["run", "updated_at"], "2026-08-10T15:00:00Z"),
    ("null parent", ["run", "parent_run_id"], None),
    ("zero parent", ["run", "parent_run_id"], ZERO),
    ("string size", ["run", "input", "size"], "11"),
    ("float revision", ["run", "checkpoint_revision"], 1.5),
    ("null cancel", ["run", "cancel_requested"], None),
    ("artifacts object", ["run", "artifacts"], {}),
    ("artifact missing size", ["run", "artifacts"], [{"id": "a", "kind": "b", "digest": DIGEST}]),
    ("run not object", ["run"], []),
    ("trace_parent number", ["run", "trace_parent"], 7),
    ("trace_parent text", ["run", "trace_parent"], "00-zz"),
]


def _corrupt_bytes(case: tuple[Any, ...]) -> Any:
    if len(case) == 2:
        return case[1]
    _, path, value = case
    if value is _DELETE:
        return _mutate(path, None, delete=True)
    return _mutate(path, value)


@pytest.mark.parametrize("case", CORRUPT, ids=[c[0] for c in CORRUPT])
def test_decode_rejects_as_corrupt(case: tuple[Any, ...]) -> None:
    """§3.6 / §12.22 / §12.27: every decode failure is CorruptRecordError naming the key."""
    with pytest.raises(CorruptRecordError) as info:
        decode_run(KEY, _corrupt_bytes(case))
    assert info.value.key == KEY
    assert KEY in str(info.value)


def test_decode_rejects_trailing_value_and_duplicate_keys() -> None:
    """§12.22: trailing JSON and duplicated fields are corrupt; trailing whitespace is fine."""
    good = encode_run(make_run())
    assert decode_run(KEY, good + b" \n") == make_run()
    with pytest.raises(CorruptRecordError):
        decode_run(KEY, good + b"{}")
    with pytest.raises(CorruptRecordError, match="duplicate"):
        decode_run(KEY, b'{"version":2,"version":2,' + good[len(b'{"version":2,') :])


def test_decode_rejects_oversized_record() -> None:
    """§12.22: a value over 64 KiB is corrupt even if it is otherwise valid JSON."""
    good = encode_run(make_run())
    padded = good + b" " * (MAX_RUN_RECORD_BYTES + 1 - len(good))
    assert len(padded) == MAX_RUN_RECORD_BYTES + 1
    with pytest.raises(CorruptRecordError, match="65536"):
        decode_run(KEY, padded)
    assert decode_run(KEY, padded[:-1]) == make_run()


def test_decode_keeps_validation_cause() -> None:
    """§3.6: a validation failure becomes corrupt with the ValueError attached as cause."""
    data = _mutate(["run", "definition_name"], "../policy")
    with pytest.raises(CorruptRecordError) as info:
        decode_run(KEY, data)
    assert isinstance(info.value.__cause__, ValueError)
    assert "definition_name" in str(info.value)


def test_decode_accepts_short_fractions_and_no_fraction() -> None:
    """§0: RFC 3339 UTC timestamps with fewer fraction digits decode to the same instant."""
    data = _mutate(["run", "updated_at"], "2026-08-11T00:00:00.5Z")
    assert decode_run(KEY, data).updated_at == datetime(2026, 8, 11, 0, 0, 0, 500000, tzinfo=UTC)
    data = _mutate(["run", "updated_at"], "2026-08-11T00:00:00Z")
    assert decode_run(KEY, data).updated_at == datetime(2026, 8, 11, tzinfo=UTC)


# -- properties ----------------------------------------------------------------------------------

ids = st.uuids().map(str).filter(lambda s: s != ZERO)
segments = st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,15}", fullmatch=True)
digests = st.binary(max_size=16).map(lambda b: hashlib.sha256(b).hexdigest())
times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(9998, 12, 31), timezones=st.just(UTC)
)
uint64 = st.integers(min_value=0, max_value=(1 << 64) - 1)


@st.composite
def runs(draw: st.DrawFn) -> Run:
    session_id = draw(ids)
    digest = draw(digests)
    created = draw(times)
    updated = created + draw(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=300)))
    kind = draw(st.sampled_from(["", "bootstrap", "parent"]))
    artifact_ids = draw(st.lists(segments, max_size=4, unique=True))
    return Run(
        session_id=session_id,
        tool_execution_id=draw(ids),
        definition_name=draw(segments),
        definition_version=draw(segments),
        id=draw(ids),
        graph_run_id=draw(ids),
        input=InputReference(
            digest, input_key(session_id, digest), draw(st.integers(1, MAX_INPUT_BYTES))
        ),
        ledger_locator="/".join(draw(st.lists(segments, min_size=1, max_size=3))),
        created_at=created,
        updated_at=updated,
        status=draw(st.sampled_from(RunStatus)),
        status_summary=draw(st.text(max_size=50)).encode("utf-8", "ignore").decode()[:300],
        cancel_requested=draw(st.booleans()),
        checkpoint_revision=draw(uint64),
        activity_cursor=draw(uint64),
        parent_run_id=draw(st.none() | ids),
        artifact_session_id=draw(ids),
        artifact_run_id=draw(ids),
        artifact_input_kind=kind,
        artifact_input_session_id=draw(ids) if kind else None,
        artifact_input_run_id=draw(ids) if kind else None,
        artifacts=tuple(
            ArtifactReference(a, draw(segments), draw(digests), draw(uint64)) for a in artifact_ids
        ),
    )


@given(runs())
@settings(max_examples=300)
def test_property_round_trip(run: Run) -> None:
    """§3.6: decode_run(encode_run(run)) == run for generated valid runs."""
    data = encode_run(run)
    assert decode_run(KEY, data) == run
    assert encode_run(decode_run(KEY, data)) == data


@given(st.binary(max_size=300))
@settings(max_examples=500)
def test_property_random_bytes_only_raise_corrupt(data: bytes) -> None:
    """§3.6: arbitrary bytes never escape decode_run as anything but CorruptRecordError."""
    with pytest.raises(CorruptRecordError):
        decode_run(KEY, data)


@given(runs(), st.data())
@settings(max_examples=300)
def test_property_mangled_records_only_raise_corrupt(run: Run, data: st.DataObject) -> None:
    """§3.6: flipping, cutting or inserting bytes of a valid record gives a run or corrupt."""
    encoded = bytearray(encode_run(run))
    position = data.draw(st.integers(0, len(encoded) - 1))
    action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
    if action == "flip":
        encoded[position] ^= data.draw(st.integers(1, 255))
    elif action == "cut":
        del encoded[position:]
    else:
        encoded[position:position] = data.draw(st.binary(min_size=1, max_size=8))
    try:
        decoded = decode_run(KEY, bytes(encoded))
    except CorruptRecordError:
        return
    validate_run(decoded)
