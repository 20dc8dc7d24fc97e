"""`SourceSession` and `SourcePool` against real MCP servers: mcp-server-time (stdio),
server-everything (stdio and streamable HTTP) and the SDK-built paging server."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from flowledger.deploy import (
    ConnectionLostError,
    HttpSource,
    SessionClosedError,
    SourcePool,
    SourceProtocolError,
    SourceSession,
    SourceUnreachableError,
    StdioSource,
    ToolArgumentsError,
    ToolCallFailedError,
    ToolCallRejectedError,
    ToolCallTimeoutError,
    ToolNotFoundError,
)

from .servers import EVERYTHING, REPO, everything_stdio, free_port, node_command, time_source

DEVNULL = open(os.devnull, "w")  # noqa: SIM115 - the servers' stderr, for the whole module
EVERYTHING_TOOLS = {"echo", "get-sum", "get-env", "trigger-long-running-operation"}
SECRET = "s3cret-value-never-shown"


def counted_everything(pids: Path) -> StdioSource:
    """server-everything over stdio, appending its process id to ``pids`` when it starts
    (``exec`` keeps the id), so a test can count server processes and kill one."""
    node = node_command()
    script = f'echo $$ >> "{pids}"; exec "{node}" "{EVERYTHING}" stdio'
    return StdioSource("sh", ["-c", script])


def started(pids: Path) -> list[int]:
    return [int(line) for line in pids.read_text().split()] if pids.exists() else []


def paging(*args: str) -> StdioSource:
    return StdioSource(sys.executable, ["-m", "tests.deploy.paging_server", *args], cwd=str(REPO))


# -- listing --------------------------------------------------------------------------


async def test_time_server_lists_its_tools_with_schemas_hints_and_fingerprints(
    time_server: StdioSource,
) -> None:
    async with SourceSession(time_server, errlog=DEVNULL) as session:
        assert session.server_info.name == "mcp-time"
        assert session.server_info.protocol_version
        tools = {tool.name: tool for tool in await session.list_tools()}
    assert set(tools) == {"get_current_time", "convert_time"}
    now = tools["get_current_time"]
    assert now.input_schema["required"] == ["timezone"]
    assert now.output_schema is not None and "datetime" in now.output_schema["properties"]
    assert now.read_only and now.idempotent and now.repeatable
    assert "Etc/UTC" in now.input_schema["properties"]["timezone"]["description"]
    for tool in tools.values():
        assert tool.contract_fingerprint.startswith("sha256:")
        assert len(tool.contract_fingerprint) == len("sha256:") + 64
        assert tool.full_fingerprint != tool.contract_fingerprint


async def test_everything_lists_the_same_tools_over_stdio_and_http(
    everything: StdioSource, everything_http: str
) -> None:
    async with SourceSession(everything, errlog=DEVNULL) as session:
        over_stdio = {tool.name: tool for tool in await session.list_tools()}
        assert session.server_info.name == "mcp-servers/everything"
    async with SourceSession(HttpSource(everything_http)) as session:
        over_http = {tool.name: tool for tool in await session.list_tools()}
        assert session.server_info.name == "mcp-servers/everything"
    assert over_stdio.keys() >= EVERYTHING_TOOLS
    assert over_http.keys() >= EVERYTHING_TOOLS
    for name in EVERYTHING_TOOLS:
        assert over_stdio[name].contract_fingerprint == over_http[name].contract_fingerprint
        assert over_stdio[name].full_fingerprint == over_http[name].full_fingerprint
    toggle = over_stdio["toggle-simulated-logging"]
    assert not toggle.read_only and not toggle.idempotent and not toggle.repeatable


async def test_the_listing_follows_every_page() -> None:
    async with SourceSession(paging("7"), errlog=DEVNULL) as session:
        tools = await session.list_tools()
        assert [tool.name for tool in tools] == [f"tool-{i}" for i in range(7)]
        assert [tool.read_only for tool in tools] == [i % 2 == 0 for i in range(7)]
        # a tool of the last page is callable: it is known from the full listing
        assert (await session.call_tool("tool-6")).text == "tool-6"


async def test_a_listing_that_never_ends_is_a_protocol_error() -> None:
    async with SourceSession(paging("7", "--loop"), errlog=DEVNULL) as session:
        with pytest.raises(SourceProtocolError, match="lists tool 'tool-0' twice") as caught:
            await session.list_tools()
        assert caught.value.code == "source_protocol"


async def test_a_changed_listing_is_listed_again_before_the_next_call() -> None:
    async with SourceSession(paging("3", "--legacy"), errlog=DEVNULL) as session:
        assert [tool.name for tool in await session.list_tools()] == ["tool-0", "tool-1", "tool-2"]
        assert (await session.call_tool("tool-2")).text == "tool-2"
        # tool-0 removes tool-2 and sends notifications/tools/list_changed, which may
        # be handled after the call's answer: the next calls are refused once it was
        await session.call_tool("tool-0", {"shrink": True})
        async with asyncio.timeout(30):
            while True:
                try:
                    await session.call_tool("tool-2")
                except ToolNotFoundError as refused:
                    assert refused.available == ("tool-0", "tool-1")
                    break
                await asyncio.sleep(0.02)


async def test_each_listing_asks_the_server_again(time_server: StdioSource) -> None:
    async with SourceSession(time_server, errlog=DEVNULL) as session:
        first = await session.list_tools()
        second = await session.list_tools()
    assert first == second
    assert first is not second


# -- calling --------------------------------------------------------------------------


async def test_calls_return_content_and_structured_content(time_server: StdioSource) -> None:
    async with SourceSession(time_server, errlog=DEVNULL) as session:
        now = await session.call_tool("get_current_time", {"timezone": "Europe/Paris"})
        assert not now.is_error
        assert now.structured_content is not None
        assert now.structured_content["timezone"] == "Europe/Paris"
        assert now.content[0]["type"] == "text" and "Europe/Paris" in now.text
        converted = await session.call_tool(
            "convert_time",
            {"source_timezone": "Etc/UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
        assert converted.structured_content is not None
        assert converted.structured_content["target"]["datetime"].endswith("21:00:00+09:00")
        assert converted.to_json()["isError"] is False


async def test_everything_tools_answer_over_stdio_and_http(
    everything: StdioSource, everything_http: str
) -> None:
    for source in (everything, HttpSource(everything_http)):
        async with SourceSession(source, errlog=DEVNULL) as session:
            assert (await session.call_tool("echo", {"message": "hello"})).text == "Echo: hello"
            total = await session.call_tool("get-sum", {"a": 2, "b": 40})
            assert "42" in total.text and not total.is_error


async def test_a_tool_error_is_a_result_not_an_exception(
    time_server: StdioSource, everything: StdioSource
) -> None:
    async with SourceSession(time_server, errlog=DEVNULL) as session:
        failed = await session.call_tool("get_current_time", {"timezone": "Not/AZone"})
        assert failed.is_error
        assert "Invalid timezone" in failed.text
        assert failed.to_json()["isError"] is True
        # the session goes on
        assert not (await session.call_tool("get_current_time", {"timezone": "UTC"})).is_error
    async with SourceSession(everything, errlog=DEVNULL) as session:
        bad = await session.call_tool("get-sum", {"a": "one"})
        assert bad.is_error and "get-sum" in bad.text


async def test_an_unknown_tool_is_refused_before_anything_is_sent(
    time_server: StdioSource, everything: StdioSource
) -> None:
    # the two servers would answer differently (a JSON-RPC error, an error result)
    for source, listed in ((time_server, "get_current_time"), (everything, "echo")):
        async with SourceSession(source, errlog=DEVNULL) as session:
            with pytest.raises(ToolNotFoundError) as caught:
                await session.call_tool("no_such_tool", {})
            error = caught.value
            assert error.code == "tool_missing" and not error.outcome_unknown
            assert error.tool == "no_such_tool" and listed in error.available
            assert source.label in str(error) and "'no_such_tool'" in str(error)
            assert (await session.tool(listed)).name == listed


@pytest.mark.parametrize(("code", "unknown"), [(-32602, False), (-32603, True)])
async def test_a_json_rpc_error_is_a_rejected_call(code: int, unknown: bool) -> None:
    async with SourceSession(paging(), errlog=DEVNULL) as session:
        with pytest.raises(ToolCallRejectedError) as caught:
            await session.call_tool("tool-2", {"reject": code})
        error = caught.value
        assert error.code == "tool_rejected" and error.error_code == code
        assert error.outcome_unknown is unknown
        assert "tool-2 rejects the call as asked" in str(error) and f"error {code}" in str(error)
        assert (await session.call_tool("tool-2")).text == "tool-2"


async def test_arguments_that_are_not_json_are_refused_before_sending(
    time_server: StdioSource,
) -> None:
    async with SourceSession(time_server, errlog=DEVNULL) as session:
        for bad in ({"timezone": object()}, {"timezone": float("nan")}, ["UTC"]):
            with pytest.raises(ToolArgumentsError) as caught:
                await session.call_tool("get_current_time", bad)  # type: ignore[arg-type]
            assert caught.value.code == "tool_arguments_invalid"
            assert not caught.value.outcome_unknown
        assert not (await session.call_tool("get_current_time", {"timezone": "UTC"})).is_error
        with pytest.raises(ValueError, match="timeout must be a positive number"):
            await session.call_tool("get_current_time", {"timezone": "UTC"}, timeout=0)


async def test_an_unexpected_failure_inside_the_sdk_is_typed(
    time_server: StdioSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SourceSession(time_server, errlog=DEVNULL) as session:
        await session.list_tools()

        async def broken(*args: object, **kwargs: object) -> None:
            raise anyio.BrokenResourceError("injected")

        monkeypatch.setattr(Client, "call_tool", broken)
        with pytest.raises(ToolCallFailedError) as caught:
            await session.call_tool("get_current_time", {"timezone": "UTC"})
        assert caught.value.outcome_unknown
        assert (caught.value.code, caught.value.tool) == ("tool_failed", "get_current_time")
        assert "BrokenResourceError: injected" in str(caught.value)
        assert isinstance(caught.value.__cause__, anyio.BrokenResourceError)


async def test_a_call_that_takes_too_long_times_out_and_the_session_goes_on(
    everything: StdioSource,
) -> None:
    async with SourceSession(everything, errlog=DEVNULL) as session:
        with pytest.raises(ToolCallTimeoutError) as caught:
            await session.call_tool(
                "trigger-long-running-operation", {"duration": 60, "steps": 60}, timeout=0.5
            )
        error = caught.value
        assert error.code == "tool_timeout" and error.outcome_unknown and error.timeout == 0.5
        assert "'trigger-long-running-operation'" in str(error) and "0.5s" in str(error)
        assert session.is_open
        assert (await session.call_tool("echo", {"message": "still here"})).text.endswith("here")


async def test_many_calls_share_one_session(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    async with SourceSession(counted_everything(pids), errlog=DEVNULL) as session:
        for i in range(200):
            result = await session.call_tool("get-sum", {"a": i, "b": 1})
            assert f"is {i + 1}." in result.text
        answers = await asyncio.gather(
            *(session.call_tool("echo", {"message": str(i)}) for i in range(50))
        )
        assert [answer.text for answer in answers] == [f"Echo: {i}" for i in range(50)]
    assert len(started(pids)) == 1


async def test_the_server_environment_is_the_sources_env_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLOWLEDGER_PARENT_ONLY", "not for the server")
    source = everything_stdio(env={"FLOWLEDGER_GIVEN": "for the server"})
    async with SourceSession(source, errlog=DEVNULL) as session:
        shown = (await session.call_tool("get-env", {})).text
    assert "FLOWLEDGER_GIVEN" in shown and "for the server" in shown
    assert "FLOWLEDGER_PARENT_ONLY" not in shown


async def test_a_server_stderr_without_a_file_descriptor_is_discarded(
    time_server: StdioSource,
) -> None:
    async with SourceSession(time_server, errlog=io.StringIO()) as session:
        assert not (await session.call_tool("get_current_time", {"timezone": "UTC"})).is_error


# -- failures -------------------------------------------------------------------------


async def test_a_server_killed_during_a_call_is_a_lost_connection(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    async with SourceSession(counted_everything(pids), errlog=DEVNULL) as session:
        await session.call_tool("echo", {"message": "up"})
        call = asyncio.create_task(
            session.call_tool("trigger-long-running-operation", {"duration": 60, "steps": 60})
        )
        await asyncio.sleep(0.3)  # let the request reach the server
        os.kill(started(pids)[0], signal.SIGKILL)
        with pytest.raises(ConnectionLostError) as caught:
            await asyncio.wait_for(call, 30)
        lost = caught.value
        assert lost.code == "connection_lost" and lost.in_flight and lost.outcome_unknown
        assert "may or may not have taken effect" in str(lost)
        assert not session.is_open
        # later calls are refused without being sent
        with pytest.raises(ConnectionLostError) as refused:
            await session.call_tool("echo", {"message": "down"})
        assert not refused.value.in_flight and not refused.value.outcome_unknown
        assert "nothing was sent" in str(refused.value)


async def test_an_http_server_killed_during_a_call_is_a_lost_connection(
    everything_http_process: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, process = everything_http_process
    async with SourceSession(HttpSource(url)) as session:
        await session.call_tool("echo", {"message": "up"})
        call = asyncio.create_task(
            session.call_tool("trigger-long-running-operation", {"duration": 60, "steps": 60})
        )
        await asyncio.sleep(0.3)
        os.killpg(process.pid, signal.SIGKILL)
        with pytest.raises(ConnectionLostError) as caught:
            await asyncio.wait_for(call, 60)
        assert caught.value.in_flight and caught.value.tool == "trigger-long-running-operation"


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (
            StdioSource("flowledger-no-such-command"),
            "command not found: flowledger-no-such-command",
        ),
        (StdioSource(sys.executable, ["-c", "pass"]), "closed the connection during the handshake"),
        (StdioSource(sys.executable, cwd="/nonexistent/dir"), "working directory not found"),
    ],
)
async def test_a_command_that_is_no_server_is_unreachable(source: StdioSource, reason: str) -> None:
    with pytest.raises(SourceUnreachableError) as caught:
        async with SourceSession(source, errlog=DEVNULL):
            pass
    assert caught.value.code == "source_unreachable"
    assert reason in str(caught.value) and source.label in str(caught.value)


async def test_a_url_where_nothing_listens_is_unreachable() -> None:
    source = HttpSource(f"http://127.0.0.1:{free_port()}/mcp")
    with pytest.raises(SourceUnreachableError, match="cannot connect") as caught:
        await SourceSession(source).open()
    assert source.label in str(caught.value)


async def test_a_server_that_never_answers_hits_the_connect_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 20)  # accept the request, never answer it
        await asyncio.sleep(60)

    listener = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    async with listener:
        for source in (
            HttpSource(f"http://127.0.0.1:{port}/mcp"),
            StdioSource(sys.executable, ["-c", "import time; time.sleep(60)"]),
        ):
            session = SourceSession(source, connect_timeout=0.5, errlog=DEVNULL)
            with pytest.raises(SourceUnreachableError, match=r"no handshake within 0.5s"):
                await session.open()
            assert not session.is_open


async def test_http_headers_are_sent_with_every_request() -> None:
    seen: list[bytes] = []

    async def answer_404(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(answer_404, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    source = HttpSource(
        f"http://127.0.0.1:{port}/mcp", {"Authorization": "Bearer t0k", "X-Probe": "1"}
    )
    async with listener:
        with pytest.raises(SourceUnreachableError, match="the handshake failed: Not Found"):
            await SourceSession(source, connect_timeout=10).open()
    assert seen
    for request in seen:
        head = request.decode("latin-1").lower()
        assert head.startswith("post /mcp ")
        assert "authorization: bearer t0k\r\n" in head and "x-probe: 1\r\n" in head


async def test_errors_and_reprs_never_show_secret_values() -> None:
    port = free_port()
    sources = [
        StdioSource("flowledger-no-such-command", env={"API_TOKEN": SECRET}),
        HttpSource(
            f"http://user:{SECRET}@127.0.0.1:{port}/mcp?key={SECRET}",
            {"Authorization": f"Bearer {SECRET}"},
        ),
    ]
    for source in sources:
        with pytest.raises(SourceUnreachableError) as caught:
            await SourceSession(source, errlog=DEVNULL).open()
        for shown in (str(caught.value), repr(source), source.label):
            assert SECRET not in shown, shown
    assert "API_TOKEN" in repr(sources[0]) and "authorization" in repr(sources[1])
    assert sources[0].identity()["env"] == ["API_TOKEN"]
    # the identity (what a pin records) keeps the query, which may tell endpoints apart;
    # credentials belong in headers, whose values it never has
    assert sources[1].identity() == {
        "transport": "http",
        "url": f"http://127.0.0.1:{port}/mcp?key={SECRET}",
        "headers": ["authorization"],
    }


async def test_closing_a_session_ends_the_calls_in_flight(everything: StdioSource) -> None:
    session = SourceSession(everything, errlog=DEVNULL)
    await session.open()
    await session.call_tool("echo", {"message": "up"})
    call = asyncio.create_task(
        session.call_tool("trigger-long-running-operation", {"duration": 60, "steps": 60})
    )
    await asyncio.sleep(0.3)
    await session.close()
    with pytest.raises(ConnectionLostError, match="the session was closed") as caught:
        await asyncio.wait_for(call, 30)
    assert caught.value.outcome_unknown


async def test_a_closed_session_refuses_calls(time_server: StdioSource) -> None:
    session = SourceSession(time_server, errlog=DEVNULL)
    with pytest.raises(SessionClosedError) as caught:
        await session.call_tool("get_current_time", {"timezone": "UTC"})
    assert caught.value.code == "source_closed"
    assert caught.value.source == time_server.label
    async with session:
        assert session.is_open
    assert not session.is_open
    with pytest.raises(SessionClosedError, match="is closed"):
        await session.list_tools()
    await session.close()  # idempotent
    with pytest.raises(RuntimeError, match="opens only once"):
        await session.open()


# -- the pool -------------------------------------------------------------------------


@pytest.fixture
async def pool() -> AsyncIterator[SourcePool]:
    async with SourcePool(errlog=DEVNULL) as opened:
        yield opened


async def test_a_pool_keeps_one_session_per_source_until_it_closes(
    tmp_path: Path, pool: SourcePool, time_server: StdioSource
) -> None:
    pids = tmp_path / "pids"
    everything = counted_everything(pids)
    first = await pool.session(everything)
    for i in range(30):
        assert (await pool.call_tool(everything, "echo", {"message": str(i)})).text == f"Echo: {i}"
        assert await pool.session(everything) is first
    # an equal spec is the same source
    assert await pool.session(StdioSource(everything.command, list(everything.args))) is first
    clock = await pool.session(time_server)
    assert clock is not first
    assert set(pool.open_sources) == {everything, time_server}
    assert len(started(pids)) == 1

    await pool.close()  # the run paused
    assert pool.open_sources == ()
    assert not first.is_open and not clock.is_open
    await pool.call_tool(everything, "echo", {"message": "resumed"})  # the run resumed
    assert len(started(pids)) == 2


async def test_concurrent_first_calls_share_one_connect(tmp_path: Path, pool: SourcePool) -> None:
    pids = tmp_path / "pids"
    everything = counted_everything(pids)
    answers = await asyncio.gather(
        *(pool.call_tool(everything, "get-sum", {"a": i, "b": i}) for i in range(20))
    )
    assert [f"is {2 * i}." in answer.text for i, answer in enumerate(answers)] == [True] * 20
    assert len(started(pids)) == 1


async def test_a_pool_replaces_a_lost_session(tmp_path: Path, pool: SourcePool) -> None:
    pids = tmp_path / "pids"
    everything = counted_everything(pids)
    lost = await pool.session(everything)
    await lost.call_tool("echo", {"message": "up"})
    os.kill(started(pids)[0], signal.SIGKILL)
    async with asyncio.timeout(30):
        while lost.is_open:  # noqa: ASYNC110 - the session notices the connection's end
            await asyncio.sleep(0.02)
    replacement = await pool.session(everything)
    assert replacement is not lost
    assert (await replacement.call_tool("echo", {"message": "back"})).text == "Echo: back"
    assert len(started(pids)) == 2


async def test_an_unreachable_source_is_not_kept(pool: SourcePool) -> None:
    missing = StdioSource("flowledger-no-such-command")
    for _ in range(2):
        with pytest.raises(SourceUnreachableError):
            await pool.session(missing)
    assert pool.open_sources == ()


# -- fingerprints against real servers --------------------------------------------------


async def test_fingerprints_are_stable_across_connections_and_transports(
    time_server: StdioSource,
) -> None:
    listings = []
    for _ in range(2):
        async with SourceSession(time_server, errlog=DEVNULL) as session:
            listings.append(
                {
                    t.name: (t.contract_fingerprint, t.full_fingerprint)
                    for t in await session.list_tools()
                }
            )
    assert listings[0] == listings[1]


async def test_a_changed_description_changes_only_the_full_fingerprint() -> None:
    """mcp-server-time writes its local time zone into its argument descriptions."""
    listings = []
    for zone in ("Etc/UTC", "Europe/Paris"):
        async with SourceSession(time_source(zone), errlog=DEVNULL) as session:
            listings.append({tool.name: tool for tool in await session.list_tools()})
    utc, paris = listings
    assert utc.keys() == paris.keys()
    for name in utc:
        assert utc[name].entry != paris[name].entry
        assert utc[name].contract_fingerprint == paris[name].contract_fingerprint
        assert utc[name].full_fingerprint != paris[name].full_fingerprint
