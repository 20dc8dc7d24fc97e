"""The capability catalog through its tool bundle (`CapabilityTools`, the Python front
door of ``capability_list``, ``capability_inspect``, ``capability_call`` and
``capability_audit``), over a registry populated with `SourceRegistry.add` and real MCP
servers: mcp-server-time, server-everything and tests/deploy/paging_server.py."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from flowledger import storage
from flowledger.deploy.registry.access import SessionSources, SourceAccess
from flowledger.deploy.registry.audit import CallAudit, audit_log
from flowledger.deploy.registry.calls import ToolTrial
from flowledger.deploy.registry.catalog import CapabilityCatalog
from flowledger.deploy.registry.errors import RegistryCorruptError
from flowledger.deploy.registry.store import Probe, SourceRegistry
from flowledger.deploy.registry.tools import CapabilityTools
from flowledger.deploy.sources.tool_info import ToolInfo
from flowledger.storage import open_store
from flowledger.tools import ToolError

from .catalog_sources import SESSION_A, SESSION_B, clock, everything, everything_http, paging

SENTINEL = "argument-sentinel-5be1f0c2"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[storage.Store]:
    async with open_store(f"sqlite:///{tmp_path / 'catalog.db'}") as opened:
        yield opened


def tools_for(
    store: storage.Store,
    catalog: CapabilityCatalog,
    session: str = SESSION_A,
    *,
    access: SourceAccess = SourceAccess.OPERATOR,
    environ: dict[str, str] | None = None,
    **trial: Any,
) -> CapabilityTools:
    sources = SessionSources(SourceRegistry.over(store), session, access, environ or {})
    audit = CallAudit(store.ledger, session, "test")
    return CapabilityTools(
        sources, audit, catalog=catalog, trial=ToolTrial(sources, catalog, audit, **trial)
    )


async def register(store: storage.Store, *documents: dict[str, Any]) -> SourceRegistry:
    registry = SourceRegistry.over(store)
    for document in documents:
        await registry.add(document)
    return registry


def names(answer: dict[str, Any]) -> list[str]:
    return [f"{r['source']}.{r['tool']}" for r in answer["results"]]


async def failure(tools: CapabilityTools, name: str, arguments: dict[str, Any]) -> str:
    with pytest.raises(ToolError) as caught:
        await tools.call(name, arguments)
    return str(caught.value)


def code_of(message: str) -> str:
    """The code a capability tool's error starts with (``... capability_x: [code] ...``)."""
    found = re.match(r"workflow tools: capability_\w+: \[([a-z_]+)\] ", message)
    assert found, message
    return found.group(1)


async def outcomes(tools: CapabilityTools) -> list[tuple[str, str, str | None]]:
    entries = (await tools.call("capability_audit", {}))["entries"]
    return [(e["tool"], e["outcome"], e["code"]) for e in entries]


async def test_a_description_word_finds_tools_across_three_real_servers(
    store: storage.Store,
) -> None:
    await register(store, clock(), everything(), paging())
    catalog = CapabilityCatalog()
    tools = tools_for(store, catalog)

    found = await tools.call("capability_list", {"query": "timezones"})
    assert [s["status"] for s in found["sources"]] == ["refreshed"] * 3
    assert [s["tools"] for s in found["sources"]] == [2, 13, 7]  # clock, everything, paging
    assert names(found)[:2] == ["clock.get_current_time", "clock.convert_time"]
    assert names(await tools.call("capability_list", {"query": "echoes"}))[0] == "everything.echo"
    numbered = names(await tools.call("capability_list", {"query": "number", "limit": 100}))
    assert {f"paging.tool-{i}" for i in range(7)} <= set(numbered)

    mixed = await tools.call("capability_list", {"query": "timezones echoes number", "limit": 100})
    assert {r["source"] for r in mixed["results"]} == {"clock", "everything", "paging"}
    scores = [r["score"] for r in mixed["results"]]
    assert scores == sorted(scores, reverse=True) and mixed["total"] == len(scores)
    first = mixed["results"][0]
    assert set(first) == {
        "source", "tool", "title", "description", "read_only", "idempotent", "callable",
        "contract_fingerprint", "score",
    }  # fmt: skip
    assert catalog.probes_started == 3  # every later question was answered from the cache
    again = await tools.call("capability_list", {"query": "timezones"})
    assert [s["status"] for s in again["sources"]] == ["fresh"] * 3
    assert catalog.probes_started == 3


async def test_results_carry_hints_fingerprints_and_whether_a_call_is_allowed(
    store: storage.Store,
) -> None:
    registry = await register(store, everything(call_tools=["toggle-simulated-logging"]))
    tools = tools_for(store, CapabilityCatalog())
    listed = {r["tool"]: r for r in (await tools.call("capability_list", {}))["results"]}
    probe = await registry.last_probe("everything")
    assert probe is not None and probe.ok
    for tool in probe.tools:
        shown = listed[tool.name]
        assert shown["contract_fingerprint"] == tool.contract_fingerprint
        assert (shown["read_only"], shown["idempotent"]) == (tool.read_only, tool.idempotent)
        assert shown["callable"] == (tool.read_only or tool.name == "toggle-simulated-logging")
        assert shown["score"] is None  # a listing without a query is not ranked
    assert listed["toggle-subscriber-updates"]["callable"] is False


async def test_a_listing_pages_with_cursors_that_belong_to_their_question(
    store: storage.Store,
) -> None:
    await register(store, clock(), everything(), paging())
    tools = tools_for(store, CapabilityCatalog())
    whole = await tools.call("capability_list", {"limit": 100})
    assert whole["total"] == 22 and whole["next_cursor"] is None
    assert names(whole) == sorted(names(whole), key=lambda n: tuple(n.split(".", 1)))
    pages: list[str] = []
    cursor = None
    while True:
        arguments: dict[str, Any] = {"limit": 5} | ({"cursor": cursor} if cursor else {})
        page = await tools.call("capability_list", arguments)
        pages += names(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == names(whole)

    first = await tools.call("capability_list", {"query": "time", "limit": 1})
    other = await failure(
        tools, "capability_list", {"query": "echo", "cursor": first["next_cursor"]}
    )
    assert code_of(other) == "cursor_invalid"
    forged = await failure(tools, "capability_list", {"cursor": "not-a-cursor"})
    assert code_of(forged) == "cursor_invalid"

    # a changed listing (a new revision of paging, with one more tool) makes old cursors stale
    await SourceRegistry.over(store).set(paging(8))
    stale = await failure(
        tools, "capability_list", {"query": "time", "cursor": first["next_cursor"]}
    )
    assert "list again" in stale and code_of(stale) == "cursor_stale"
    assert (await tools.call("capability_list", {}))["total"] == 23


async def test_listings_are_refreshed_when_stale_or_asked_and_not_in_a_loop(
    store: storage.Store,
) -> None:
    await register(store, clock())
    eager = CapabilityCatalog(ttl=1e-9, min_refresh=0)  # every listing is due at once
    tools = tools_for(store, eager)
    for _ in range(3):
        answer = await tools.call("capability_list", {"query": "time"})
        assert answer["sources"][0]["status"] == "refreshed"
    assert eager.probes_started == 3

    patient = CapabilityCatalog(min_refresh=3600)  # the default TTL; refresh floor of an hour
    tools = tools_for(store, patient)
    for ask in ({}, {"refresh": True}, {"refresh": True}):
        answer = await tools.call("capability_list", ask)
        assert answer["sources"][0]["status"] == "fresh"  # the registry's probe above
    assert patient.probes_started == 0
    willing = CapabilityCatalog(min_refresh=0)
    tools = tools_for(store, willing)
    answer = await tools.call("capability_list", {"refresh": True})
    assert answer["sources"][0]["status"] == "refreshed" and willing.probes_started == 1


async def test_concurrent_askers_of_two_sessions_share_one_refresh(store: storage.Store) -> None:
    await register(store, clock(), everything(), paging())
    catalog = CapabilityCatalog()
    a, b = tools_for(store, catalog, SESSION_A), tools_for(store, catalog, SESSION_B)
    answers = await asyncio.gather(
        *(tools.call("capability_list", {"query": "time"}) for tools in (a, b, a, b, a, b))
    )
    assert catalog.probes_started == 3  # one per source, not one per asker
    assert all(names(answer) == names(answers[0]) for answer in answers)
    assert all(s["tools"] for answer in answers for s in answer["sources"])


async def test_a_source_that_stops_answering_keeps_its_last_good_listing(
    store: storage.Store, everything_http_process: Any
) -> None:
    url, process = everything_http_process
    registry = await register(store, everything_http(url))
    catalog = CapabilityCatalog(ttl=1e-9, retry_after=3600)
    tools = tools_for(store, catalog)
    first = await tools.call("capability_list", {"query": "echo"})
    assert first["sources"][0]["status"] == "refreshed"

    process.kill()
    process.wait(30)
    answer = await tools.call("capability_list", {"query": "echo"})
    (source,) = answer["sources"]
    assert source["status"] == "unreachable" and "unreachable" in source["error"]
    assert source["tools"] == 13 and source["listed_revision"] == 1
    assert names(answer) == names(first)  # searched in the last good listing
    recorded = await registry.last_probe("everything")
    assert recorded is not None and recorded.ok  # the failure is not recorded over it
    assert catalog.probes_started == 2
    again = await tools.call("capability_inspect", {"source": "everything", "tool": "echo"})
    assert again["listing"]["status"] == "unreachable"
    assert catalog.probes_started == 2  # a failed source is not asked again at once


async def test_a_damaged_probe_record_is_probed_again_and_replaced(store: storage.Store) -> None:
    registry = await register(store, clock())
    await registry.probe("clock", {})
    key = "deploy/registry/probes/clock"  # the layout of flowledger/deploy/registry/store.py
    await store.kv.put(key, b"{damaged", expected=(await store.kv.get(key)).revision)
    with pytest.raises(RegistryCorruptError):
        await registry.last_probe("clock")
    catalog = CapabilityCatalog()
    answer = await tools_for(store, catalog).call("capability_list", {"query": "timezone"})
    assert answer["sources"][0]["status"] == "refreshed" and len(answer["results"]) == 2
    recorded = await registry.last_probe("clock")
    assert recorded is not None and recorded.ok and catalog.probes_started == 1


async def test_a_read_only_door_answers_from_the_cache_and_starts_nothing(
    store: storage.Store,
) -> None:
    registry = await register(store, clock())
    reader = CapabilityCatalog(ttl=1e-9)
    tools = tools_for(store, reader, access=SourceAccess.TENANT.read_only())
    unlisted = await tools.call("capability_list", {"refresh": True})
    assert unlisted["sources"][0]["status"] == "unlisted" and unlisted["results"] == []
    assert "starts and contacts no source" in unlisted["note"]
    refused = await failure(
        tools, "capability_inspect", {"source": "clock", "tool": "convert_time"}
    )
    assert code_of(refused) == "listing_unavailable"

    await registry.probe("clock", {})  # the operator's probe
    stale = await tools.call("capability_list", {"query": "timezone", "refresh": True})
    assert stale["sources"][0]["status"] == "stale" and len(stale["results"]) == 2
    assert reader.probes_started == 0
    call = {"source": "clock", "tool": "get_current_time", "arguments": {"timezone": "UTC"}}
    assert code_of(await failure(tools, "capability_call", call)) == "launch_refused"
    assert (await tools.call("capability_audit", {}))["entries"] == []


async def test_inspect_shows_schemas_fingerprints_and_a_valid_example(
    store: storage.Store,
) -> None:
    registry = await register(store, clock(), everything())
    tools = tools_for(store, CapabilityCatalog())
    shown = await tools.call("capability_inspect", {"source": "clock", "tool": "get_current_time"})
    probe = await registry.last_probe("clock")
    assert probe is not None
    (expected,) = [t for t in probe.tools if t.name == "get_current_time"]
    assert shown["tool"] == expected.to_json()
    assert shown["tool"]["annotations"]["readOnlyHint"] is True
    assert shown["callable"] is True and "read-only" in shown["callable_because"]
    assert shown["example"] == {"arguments": {"timezone": "string"}, "valid": True}
    for tool in ("get-sum", "get-structured-content", "get-annotated-message", "echo"):
        example = (await tools.call("capability_inspect", {"source": "everything", "tool": tool}))[
            "example"
        ]
        assert example["valid"] is True, (tool, example)
    missing = await failure(tools, "capability_inspect", {"source": "clock", "tool": "nope"})
    assert "get_current_time" in missing and code_of(missing) == "tool_missing"


async def test_call_runs_a_read_only_tool_and_refuses_others_with_nothing_started(
    store: storage.Store,
) -> None:
    registry = await register(store, clock(), everything())
    tools = tools_for(store, CapabilityCatalog())
    done = await tools.call(
        "capability_call",
        {"source": "clock", "tool": "get_current_time", "arguments": {"timezone": "Europe/Paris"}},
    )
    assert done["outcome"] == "ok" and done["is_error"] is False and done["revision"] == 1
    assert done["structured_content"]["timezone"] == "Europe/Paris"
    assert done["truncated"] is False

    refused = await failure(
        tools,
        "capability_call",
        {"source": "everything", "tool": "toggle-simulated-logging", "arguments": {}},
    )
    assert "not annotated read-only" in refused and code_of(refused) == "call_refused"
    invalid = await failure(
        tools, "capability_call", {"source": "everything", "tool": "echo", "arguments": {}}
    )
    assert "required ['message']" in invalid and code_of(invalid) == "tool_arguments_invalid"
    assert await outcomes(tools) == [
        ("get_current_time", "started", None),
        ("get_current_time", "ok", None),
        ("toggle-simulated-logging", "refused", "call_refused"),  # no process was started
        ("echo", "invalid_arguments", "tool_arguments_invalid"),  # checked against the cache
    ]

    # the operator allows the tool (call_tools): now it may be tried
    await registry.set(everything(call_tools=["toggle-simulated-logging"]))
    allowed = await tools.call(
        "capability_call",
        {"source": "everything", "tool": "toggle-simulated-logging", "arguments": {}},
    )
    assert allowed["outcome"] == "ok" and allowed["revision"] == 2


async def test_a_tool_the_live_server_no_longer_calls_read_only_is_refused(
    store: storage.Store,
) -> None:
    """The cached listing alone is not trusted: a probe record claiming tool-1 is
    read-only (the server says otherwise) lets the call start, and the server's own
    listing refuses it before the call."""
    registry = await register(store, paging())
    probe = await registry.probe("paging", {})
    forged = tuple(
        ToolInfo.from_entry({**tool.entry, "annotations": {"readOnlyHint": True}})
        if tool.name == "tool-1"
        else tool
        for tool in probe.tools
    )
    await registry.record_probe(
        "paging", Probe(probe.revision, probe.probed_at, True, None, probe.server, forged)
    )
    tools = tools_for(store, CapabilityCatalog())
    assert (await tools.call("capability_inspect", {"source": "paging", "tool": "tool-1"}))[
        "callable"
    ]
    refused = await failure(
        tools, "capability_call", {"source": "paging", "tool": "tool-1", "arguments": {}}
    )
    assert code_of(refused) == "call_refused"
    assert await outcomes(tools) == [
        ("tool-1", "started", None),
        ("tool-1", "refused", "call_refused"),
    ]
    done = await tools.call(
        "capability_call", {"source": "paging", "tool": "tool-2", "arguments": {}}
    )
    assert done["content"] == [{"type": "text", "text": "tool-2"}]


async def test_calls_are_bounded_by_timeout_and_concurrency_and_cancellation_is_audited(
    store: storage.Store,
) -> None:
    await register(store, everything())
    tools = tools_for(store, CapabilityCatalog(), max_concurrent=1)
    long = {
        "source": "everything",
        "tool": "trigger-long-running-operation",
        "arguments": {"duration": 600, "steps": 1},
    }
    slow = asyncio.create_task(tools.call("capability_call", {**long, "timeout": 120}))
    async with asyncio.timeout(60):  # polls the log: its writer has no event to wait on
        while not (await tools.audit.read())[0]:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    busy = await failure(tools, "capability_call", {**long, "timeout": 1})
    assert code_of(busy) == "call_busy"
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    timed_out = await failure(tools, "capability_call", {**long, "timeout": 1})
    assert "did not answer within 1s" in timed_out and code_of(timed_out) == "tool_timeout"
    assert [(tool, outcome) for tool, outcome, _ in await outcomes(tools)] == [
        ("trigger-long-running-operation", "started"),
        ("trigger-long-running-operation", "busy"),
        ("trigger-long-running-operation", "cancelled"),
        ("trigger-long-running-operation", "started"),
        ("trigger-long-running-operation", "timeout"),
    ]
    entries = (await tools.call("capability_audit", {}))["entries"]
    assert entries[0]["call"] == entries[2]["call"]
    assert isinstance(entries[2]["duration_ms"], float) and entries[2]["duration_ms"] >= 0


async def test_audit_entries_hold_no_argument_or_result_bytes(store_url: str) -> None:
    async with open_store(store_url) as store:
        await register(store, everything())
        tools = tools_for(store, CapabilityCatalog())
        echoed = await tools.call(
            "capability_call",
            {"source": "everything", "tool": "echo", "arguments": {"message": SENTINEL}},
        )
        assert SENTINEL in json.dumps(echoed)  # it was sent, and came back
        await failure(
            tools,
            "capability_call",
            {"source": "everything", "tool": "get-sum", "arguments": {"a": SENTINEL, "b": 1}},
        )
        await failure(
            tools,
            "capability_call",
            {"source": "everything", "tool": SENTINEL, "arguments": {"x": SENTINEL}},
        )
        records = await store.ledger.read(audit_log(SESSION_A), limit=100)
        assert (
            len(records) == 5
        )  # echo: started, ok; get-sum: invalid; missing: started, tool_missing
        assert all(SENTINEL.encode() not in record.payload for record in records[:3])
        shown = await tools.call("capability_audit", {"limit": 3})
        assert SENTINEL not in json.dumps(shown)
        assert [e["outcome"] for e in shown["entries"]] == ["started", "ok", "invalid_arguments"]
        rest = await tools.call("capability_audit", {"cursor": shown["next_cursor"]})
        assert [e["outcome"] for e in rest["entries"]] == ["started", "tool_missing"]
        assert rest["next_cursor"] is None
        for entry in shown["entries"] + rest["entries"]:
            assert entry["session"] == SESSION_A and entry["transport"] == "test"


async def test_a_tenant_sees_none_of_another_sessions_sources_calls_or_audit(
    store: storage.Store,
) -> None:
    keyed = {**everything()["stdio"], "env": {"KEY": {"secret": "key"}}}
    for_a = {"key": {"env": "CATALOG_TEST_KEY", "sessions": [SESSION_A]}}
    await register(
        store,
        clock(),
        everything("private", sessions=[SESSION_A], stdio=keyed, secrets=for_a),
        everything("granted", stdio=keyed, secrets=for_a),  # B sees it; the secret is A's
    )
    environ = {"CATALOG_TEST_KEY": "key-value-9d1c"}
    catalog = CapabilityCatalog()
    a = tools_for(store, catalog, SESSION_A, access=SourceAccess.TENANT, environ=environ)
    b = tools_for(store, catalog, SESSION_B, access=SourceAccess.TENANT, environ=environ)

    seen_by_a = await a.call("capability_list", {"query": "echo"})
    assert {s["source"] for s in seen_by_a["sources"]} == {"clock", "granted", "private"}
    assert "private.echo" in names(seen_by_a)
    env = await a.call("capability_call", {"source": "private", "tool": "get-env", "arguments": {}})
    assert "key-value-9d1c" in json.dumps(env)  # the secret granted to A reached the server

    seen_by_b = await b.call("capability_list", {"query": "echo", "limit": 100})
    assert {s["source"] for s in seen_by_b["sources"]} == {"clock", "granted"}
    assert not any(r["source"] == "private" for r in seen_by_b["results"])
    for tool, arguments in [
        ("capability_list", {"source": "private"}),
        ("capability_inspect", {"source": "private", "tool": "echo"}),
        ("capability_call", {"source": "private", "tool": "echo", "arguments": {"message": "x"}}),
    ]:
        refused = await failure(b, tool, arguments)
        assert "'private' is not registered" in refused and code_of(refused) == "source_missing"
    # the source B sees but whose secret is A's only: refused before anything starts
    secret = await failure(
        b, "capability_call", {"source": "granted", "tool": "get-env", "arguments": {}}
    )
    assert "not granted to this session" in secret and code_of(secret) == "credential_missing"

    assert await outcomes(b) == [
        ("echo", "unavailable", "source_missing"),
        ("get-env", "unavailable", "credential_missing"),
    ]
    assert await outcomes(a) == [("get-env", "started", None), ("get-env", "ok", None)]


async def test_bad_arguments_are_typed_errors_naming_the_place(store: storage.Store) -> None:
    registry = await register(store, clock())
    tools = tools_for(store, CapabilityCatalog())
    for name, arguments, fragment in [
        ("capability_list", {"query": "x" * 513}, "$.query"),
        ("capability_list", {"limit": 0}, "$.limit"),
        ("capability_list", {"limit": 101}, "$.limit"),
        ("capability_list", {"sort": "name"}, "'sort' was unexpected"),
        ("capability_inspect", {"source": "clock"}, "'tool' is a required property"),
        ("capability_call", {"source": "clock", "tool": "t", "arguments": []}, "$.arguments"),
        ("capability_call", {"source": "c", "tool": "t", "arguments": {}, "timeout": 121},
         "$.timeout"),
        ("capability_audit", {"cursor": "x"}, "not one this tool gave"),
        ("capability_list", "not json", "not JSON"),
    ]:  # fmt: skip
        message = await failure(tools, name, arguments)  # type: ignore[arg-type]
        assert fragment in message, (name, message)
    await registry.disable("clock")
    assert (await tools.call("capability_list", {}))["sources"] == []
    disabled = await failure(tools, "capability_list", {"source": "clock"})
    assert code_of(disabled) == "source_disabled"
    assert code_of(await failure(tools, "capability_list", {"source": "nope"})) == "source_missing"
    assert (await tools.call("capability_audit", {}))["entries"] == []


async def test_a_damaged_audit_record_is_named_not_skipped() -> None:
    """``capability_audit`` refuses a page holding a record it cannot read (audit_corrupt,
    naming its sequence number) rather than showing a log with a hole in it."""
    async with open_store("memory://") as store:
        tools = tools_for(store, CapabilityCatalog())
        audit = CallAudit(store.ledger, SESSION_A, "test")
        await audit.record("c1", "clock", 1, "get_current_time", "started")
        name = audit_log(SESSION_A)
        await store.ledger.append(name, [b'{"call": "c2"}'], expected=1)
        first = await tools.call("capability_audit", {"limit": 1})
        assert [entry["call"] for entry in first["entries"]] == ["c1"]
        message = await failure(tools, "capability_audit", {"cursor": first["next_cursor"]})
        assert code_of(message) == "audit_corrupt"
        assert "audit record 2 is damaged: KeyError" in message
