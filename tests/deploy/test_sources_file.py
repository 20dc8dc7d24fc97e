"""The sources file: `load_sources` and `reconcile` (every backend), and ``--sources
FILE`` of ``flowledger mcp`` (stdio, through the SDK client), ``worker`` and ``web``:
reconciled before anything is served, an invalid file a one-line startup error with
nothing written."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from flowledger.deploy.registry.reconcile import (
    SourcesFileError,
    load_sources,
    reconcile,
    reconcile_file,
)
from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import Store, open_store

from ..mcp.conftest import payload
from .servers import REPO, time_command
from .test_deployed_runs import snapshot


def source(name: str, **transport: Any) -> dict[str, Any]:
    return {
        "format": "flowledger.source/v1",
        "name": name,
        **(transport or {"http": {"url": f"https://{name}.example/mcp"}}),
    }


def clock(zone: str) -> dict[str, Any]:
    return source("clock", stdio={"command": time_command(), "args": ["--local-timezone", zone]})


def write(path: Path, documents: Any) -> Path:
    path.write_text(json.dumps(documents))
    return path


# -- reading -------------------------------------------------------------------------------------


def test_a_file_a_single_document_and_a_directory(tmp_path: Path) -> None:
    listed = tmp_path / "sources.yaml"
    listed.write_text(
        "- format: flowledger.source/v1\n  name: one\n  http: {url: 'https://one.example/mcp'}\n"
        "- format: flowledger.source/v1\n  name: two\n  stdio: {command: two-mcp}\n"
    )
    entries = load_sources(listed)
    assert [(e.place, e.source.name) for e in entries] == [
        (f"{listed}[0]", "one"),
        (f"{listed}[1]", "two"),
    ]
    single = write(tmp_path / "single.json", source("three"))
    assert [(e.place, e.source.name) for e in load_sources(single)] == [(str(single), "three")]
    (tmp_path / "empty.yaml").write_text("")
    assert load_sources(tmp_path / "empty.yaml") == []

    folder = tmp_path / "sources.d"
    folder.mkdir()
    write(folder / "b.json", [source("bee"), source("bee_two")])
    (folder / "a.yml").write_text(json.dumps(source("ay")))
    (folder / "notes.txt").write_text("not a source")
    (folder / ".hidden.yaml").write_text("not: [valid")
    assert [e.source.name for e in load_sources(folder)] == ["ay", "bee", "bee_two"]
    (tmp_path / "nothing.d").mkdir()
    assert load_sources(tmp_path / "nothing.d") == []


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        ("- {format: flowledger.source/v1, name: x}\n", ["[0] (source 'x'): $:", "exactly one"]),
        ("- 3\n", ["[0]: $: a source is a JSON object"]),
        ("format: flowledger.source/v1\nname: [\n", ["invalid YAML at line"]),
        ("just text\n", ["holds a list of flowledger.source/v1 documents"]),
        (
            json.dumps([source("same"), source("other"), source("same")]),
            ["[2] (source 'same'): source 'same' is also defined at", "[0]"],
        ),
        (
            json.dumps([{**source("bad"), "http": {"url": "ftp://x"}}]),
            ["[0] (source 'bad'): http: ", "http:// or https://"],
        ),
        (
            json.dumps([{**source("s"), "sessions": ["nope"]}]),
            ["[0] (source 's'): sessions[0]:"],
        ),
    ],
)
async def test_an_invalid_file_is_one_error_and_writes_nothing(
    tmp_path: Path, content: str, fragments: list[str]
) -> None:
    path = tmp_path / "sources.yaml"
    path.write_text(content)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with pytest.raises(SourcesFileError) as caught:
        await reconcile_file(url, path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path))
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert not (tmp_path / "r.db").exists()  # refused before the database was opened


async def test_unusable_paths_and_a_memory_database(tmp_path: Path) -> None:
    with pytest.raises(SourcesFileError, match="no such file or directory"):
        load_sources(tmp_path / "missing.yaml")
    folder = tmp_path / "d"
    folder.mkdir()
    write(folder / "a.json", [source("dup")])
    write(folder / "b.json", [source("dup")])
    with pytest.raises(SourcesFileError, match=r"b\.json\[0\] .*also defined at .*a\.json\[0\]"):
        load_sources(folder)
    with pytest.raises(SourcesFileError, match="memory:// database is private"):
        await reconcile_file("memory://", write(tmp_path / "ok.json", [source("x")]))


# -- reconciling ---------------------------------------------------------------------------------


async def test_reconcile_adds_changes_and_leaves_others_alone(store: Store, tmp_path: Path) -> None:
    """New names are added, changed documents get a new revision (keeping the enabled
    state), unchanged ones write nothing, and sources the file does not name are left
    alone and listed; a removed name comes back at its next revision."""
    registry = SourceRegistry.over(store)
    await registry.add(source("manual"))
    first = load_sources(write(tmp_path / "v1.json", [source("one"), source("two")]))
    done = await reconcile(registry, first, "v1.json")
    assert [(r.name, r.action, r.revision) for r in done.sources] == [
        ("one", "added", 1),
        ("two", "added", 1),
    ]
    assert done.absent == ("manual",)
    assert done.lines()[-1] == "sources v1.json: left alone (registered, not in the file): manual"

    await registry.disable("two")
    changed = {**source("two"), "description": "now described"}
    second = load_sources(write(tmp_path / "v2.json", [source("one"), changed]))
    before = await snapshot(store)
    done = await reconcile(registry, second, "v2.json")
    assert [(r.name, r.action, r.revision) for r in done.sources] == [
        ("one", "unchanged", 1),
        ("two", "changed", 2),
    ]
    two = await registry.get("two")
    assert (two.revision, two.enabled, two.source.document.description) == (
        2,
        False,
        "now described",
    )
    assert (await snapshot(store))["kv"].keys() - before["kv"].keys() == {
        "deploy/registry/revisions/two/2"
    }

    before = await snapshot(store)
    again = await reconcile(registry, second, "v2.json")
    assert [r.action for r in again.sources] == ["unchanged", "unchanged"]
    assert await snapshot(store) == before

    async def no_runs(session_id: str, run_id: str) -> bool:
        return False

    await registry.remove("one", no_runs)
    back = await reconcile(registry, second, "v2.json")
    assert (back.sources[0].name, back.sources[0].action, back.sources[0].revision) == (
        "one",
        "added",
        2,
    )
    assert (await registry.get("one")).enabled


async def test_two_processes_reconciling_at_once_both_succeed(tmp_path: Path) -> None:
    """Two reconciliations of the same changed file race on one source: both succeed and
    exactly one new revision is written."""
    url = f"sqlite:///{tmp_path / 'race.db'}"
    async with open_store(url) as store:
        await SourceRegistry.over(store).add(source("shared"))
    path = write(tmp_path / "s.json", [{**source("shared"), "description": "changed"}])
    results = await asyncio.gather(*(reconcile_file(url, path) for _ in range(4)))
    assert sorted(r.sources[0].action for r in results).count("changed") >= 1
    assert {r.sources[0].revision for r in results} == {2}
    async with open_store(url) as store:
        assert (await SourceRegistry.over(store).get("shared")).latest == 2


# -- the commands ----------------------------------------------------------------------------------


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "flowledger", *args]


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("FLOWLEDGER_DEBUG", "FLOWLEDGER_DB")}


@asynccontextmanager
async def mcp_stdio(db: str, sources: Path, errlog: Path) -> AsyncIterator[Client]:
    """``flowledger mcp --sources FILE`` over stdio, its stderr in ``errlog``."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "flowledger", "mcp", "--db", db, "--sources", str(sources)],
        cwd=str(REPO),
    )
    with errlog.open("w") as log:
        async with Client(stdio_client(params, errlog=log)) as client:
            yield client


async def test_mcp_stdio_reconciles_the_file_before_serving(tmp_path: Path) -> None:
    """The served session can probe the source the file registers (the registry had it
    before the first request); a changed file is the next revision, an unchanged one
    writes nothing, a source not in the file is left alone and said so; an invalid file
    stops the server at start with one line, nothing written."""
    db = f"sqlite:///{tmp_path / 'served.db'}"
    async with open_store(db) as store:
        await SourceRegistry.over(store).add(source("manual"))
    path = tmp_path / "sources.json"
    log = tmp_path / "stderr.log"

    write(path, [clock("Etc/UTC")])
    async with mcp_stdio(db, path, log) as client:
        probed = payload(await client.call_tool("source_probe", {"source": "clock"}))
    assert probed["source"]["revision"] == 1
    assert {tool["name"] for tool in probed["tools"]} == {"get_current_time", "convert_time"}
    lines = log.read_text().splitlines()
    assert f"sources {path}: clock added (revision 1)" in lines
    assert f"sources {path}: left alone (registered, not in the file): manual" in lines

    write(path, [clock("Europe/Paris")])
    async with mcp_stdio(db, path, log) as client:
        again = payload(await client.call_tool("source_probe", {"source": "clock"}))
    assert again["source"]["revision"] == 2
    assert f"sources {path}: clock changed (revision 2)" in log.read_text().splitlines()
    assert {t["full_fingerprint"] for t in again["tools"]} != {
        t["full_fingerprint"] for t in probed["tools"]
    }  # mcp-server-time names the zone in its descriptions

    async with open_store(db) as store:
        before = (await snapshot(store))["kv"]
    async with mcp_stdio(db, path, log) as client:
        await client.list_tools()
    assert f"sources {path}: clock unchanged (revision 2)" in log.read_text().splitlines()
    async with open_store(db) as store:
        after = (await snapshot(store))["kv"]
    assert {k: v for k, v in after.items() if k.startswith("deploy/registry/revisions/")} == {
        k: v for k, v in before.items() if k.startswith("deploy/registry/revisions/")
    }

    bad = write(tmp_path / "bad.json", [clock("Etc/UTC"), source("Bad Name")])
    async with open_store(db) as store:
        before = await snapshot(store)
    done = await asyncio.to_thread(
        subprocess.run,
        command("mcp", "--db", db, "--sources", str(bad)),
        cwd=REPO,
        env=child_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --sources: "), done.stderr
    assert f"{bad}[1] (source 'Bad Name'): name:" in lines[0]
    assert done.stdout == ""
    async with open_store(db) as store:
        assert await snapshot(store) == before


@pytest.mark.parametrize("name", ["web", "worker"])
def test_web_and_worker_refuse_an_invalid_file_at_start(tmp_path: Path, name: str) -> None:
    bad = write(tmp_path / "bad.json", {"format": "flowledger.source/v1", "name": "x"})
    db = f"sqlite:///{tmp_path / 'w.db'}"
    done = subprocess.run(
        command(name, "--db", db, "--sources", str(bad)),
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --sources: {bad} (source 'x')")
    assert "exactly one of stdio, http, python, builtin and openapi" in lines[0]
    assert not (tmp_path / "w.db").exists()


async def test_a_worker_reconciles_a_directory_at_start(tmp_path: Path) -> None:
    folder = tmp_path / "sources.d"
    folder.mkdir()
    write(folder / "clock.json", clock("Etc/UTC"))
    write(folder / "more.json", [source("search")])
    db = f"sqlite:///{tmp_path / 'worker.db'}"
    process = await asyncio.create_subprocess_exec(
        *command("worker", "--db", db, "--sources", str(folder), "--poll", "0.2"),
        cwd=REPO,
        env=child_env(),
        stderr=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
    )
    try:
        assert process.stderr is not None
        seen: list[str] = []
        async with asyncio.timeout(120):  # only against a hang
            while not any("polling every" in line for line in seen):
                line = await process.stderr.readline()
                assert line, seen
                seen.append(line.decode().strip())
        # both said before the worker started polling
        assert f"sources {folder}: clock added (revision 1)" in seen[:-1]
        assert f"sources {folder}: search added (revision 1)" in seen[:-1]
    finally:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            await process.wait()
    async with open_store(db) as store:
        names = [item.name for item in await SourceRegistry.over(store).list()]
    assert names == ["clock", "search"]
