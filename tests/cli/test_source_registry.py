"""``flowledger source add|set|list|show|enable|disable|remove|probe NAME`` as child
processes on a real database (SQLite, and PostgreSQL where the scenario is cheap), with
real MCP servers (mcp-server-time; the deploy tests' env server for a pinned run)."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.deploy import SourceSession, StdioSource
from flowledger.storage import open_store

from .._postgres import postgres_url
from ..deploy.servers import REPO, free_port, time_command
from ..deploy.test_deployed_runs import SESSION, prepared, server_script, service, snapshot

DEVNULL = open(os.devnull, "w")  # noqa: SIM115 - the servers' stderr, for the whole module


def flowledger(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m flowledger ARGS`` as a child process."""
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWLEDGER_DEBUG", "FLOWLEDGER_DB")}
    env["COLUMNS"] = "120"
    return subprocess.run(
        [sys.executable, "-m", "flowledger", *args],
        cwd=REPO,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )


def ok(done: subprocess.CompletedProcess[str]) -> Any:
    """The JSON a successful ``--json`` command printed."""
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    assert len(done.stdout.splitlines()) == 1, done.stdout
    return json.loads(done.stdout)


def one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in done.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def stored(url: str) -> dict[str, Any]:
    """Every key, value and revision, blob and ledger record of the database."""

    async def read() -> dict[str, Any]:
        async with open_store(url) as store:
            return await snapshot(store)

    return asyncio.run(read())


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'registry.db'}"
    else:
        with postgres_url() as url:
            yield url


@pytest.fixture
def sqlite_db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'registry.db'}"


def clock_line(zone: str = "Etc/UTC") -> str:
    return shlex.join([time_command(), "--local-timezone", zone])


# -- add, list, show, set, disable, enable ------------------------------------------------------


def test_add_list_show_set_disable_enable(db: str, tmp_path: Path) -> None:
    """Add from a file and from flags, list, show, set (a stale --expect refused with
    nothing written, the right one saving revision 2, an unchanged document writing
    nothing), disable and enable."""
    session = str(uuid.uuid4())
    (tmp_path / "weather.yaml").write_text(
        "format: flowledger.source/v1\n"
        "name: weather\n"
        "description: Forecasts.\n"
        "http:\n"
        "  url: https://weather.example/mcp\n"
        "  headers: {Authorization: {secret: weather_key}}\n"
        "secrets:\n"
        "  weather_key: {env: WEATHER_API_KEY}\n"
        f"sessions: [{session}]\n"
        "allow_tools: [get_forecast]\n"
    )
    added = ok(flowledger("source", "add", str(tmp_path / "weather.yaml"), "--db", db, "--json"))
    assert (added["name"], added["revision"], added["enabled"], added["added"]) == (
        "weather",
        1,
        True,
        True,
    )
    assert added["document"]["secrets"] == {"weather_key": {"env": "WEATHER_API_KEY"}}

    flags = ok(
        flowledger(
            "source", "add", "clock", "--stdio", clock_line(), "--env", "TZ_NOTE=utc",
            "--env", "TOKEN=secret:clock_token", "--secret", "clock_token=CLOCK_TOKEN",
            "--session", session, "--allow-tool", "get_current_time",
            "--call-tool", "convert_time", "--description", "The time.",
            "--db", db, "--json",
        )
    )  # fmt: skip
    assert flags["document"] == {
        "format": "flowledger.source/v1",
        "name": "clock",
        "description": "The time.",
        "stdio": {
            "command": time_command(),
            "args": ["--local-timezone", "Etc/UTC"],
            "env": {"TZ_NOTE": "utc", "TOKEN": {"secret": "clock_token"}},
        },
        "secrets": {"clock_token": {"env": "CLOCK_TOKEN"}},
        "sessions": [session],
        "allow_tools": ["get_current_time"],
        "call_tools": ["convert_time"],
    }
    # the same document from stdin (JSON) is the same content: add is refused for the name
    one_line_error(
        flowledger("source", "add", "-", "--db", db, stdin=json.dumps(flags["document"])),
        "source 'clock' is already registered",
    )

    listed = ok(flowledger("source", "list", "--db", db, "--json"))["sources"]
    assert [(s["name"], s["revision"], s["enabled"], s["transport"]) for s in listed] == [
        ("clock", 1, True, "stdio"),
        ("weather", 1, True, "http"),
    ]
    assert all(s["visibility"] == [session] and s["last_probe"] is None for s in listed)
    table = flowledger("source", "list", "--db", db)
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[2:]}
    assert rows["weather"] == ["weather", "1", "yes", "1", "session(s)", "never", "-"]

    shown = ok(flowledger("source", "show", "weather", "--db", db, "--json"))
    assert shown["document"] == added["document"]
    assert [r["revision"] for r in shown["revisions"]] == [1]
    assert (shown["last_probe"], shown["runs"]) == (None, [])

    # set: a stale --expect is refused and writes nothing
    (tmp_path / "weather2.yaml").write_text(
        (tmp_path / "weather.yaml").read_text().replace("Forecasts.", "Forecasts, daily.")
    )
    before = stored(db)
    one_line_error(
        flowledger("source", "set", str(tmp_path / "weather2.yaml"), "--expect", "2", "--db", db),
        "source 'weather': expected revision 2, the current one is 1",
    )
    assert stored(db) == before
    saved = ok(
        flowledger(
            "source", "set", str(tmp_path / "weather2.yaml"), "--expect", "1", "--db", db, "--json"
        )
    )
    assert (saved["revision"], saved["unchanged"]) == (2, False)
    assert saved["document"]["description"] == "Forecasts, daily."
    before = stored(db)
    again = ok(flowledger("source", "set", str(tmp_path / "weather2.yaml"), "--db", db, "--json"))
    assert (again["revision"], again["unchanged"]) == (2, True)
    assert stored(db) == before
    first = ok(flowledger("source", "show", "weather", "--revision", "1", "--db", db, "--json"))
    assert (first["revision"], first["latest"]) == (1, 2)
    assert first["document"]["description"] == "Forecasts."
    assert [r["revision"] for r in first["revisions"]] == [1, 2]
    text = flowledger("source", "show", "weather", "--db", db)
    assert text.returncode == 0, text.stderr
    assert "revision 2 of 2" in text.stdout and "description: Forecasts, daily." in text.stdout
    assert "WEATHER_API_KEY" in text.stdout and "last probe never" in text.stdout

    # disable and enable
    assert ok(flowledger("source", "disable", "clock", "--db", db, "--json")) == {
        "name": "clock",
        "enabled": False,
    }
    states = {
        s["name"]: s["enabled"]
        for s in ok(flowledger("source", "list", "--db", db, "--json"))["sources"]
    }
    assert states == {"clock": False, "weather": True}
    one_line_error(flowledger("source", "probe", "clock", "--db", db), "source 'clock' is disabled")
    enabled = flowledger("source", "enable", "clock", "--db", db)
    assert enabled.returncode == 0 and "source clock is enabled" in enabled.stdout
    assert ok(flowledger("source", "show", "clock", "--db", db, "--json"))["enabled"] is True


# -- probe NAME ----------------------------------------------------------------------------------


async def test_probe_name_records_the_probe(sqlite_db: str) -> None:
    """``source probe NAME`` against mcp-server-time: the listing with both fingerprints
    per tool, recorded as the last probe that ``show`` and ``list`` report; a source
    that does not answer is recorded as such and exits 1."""
    ok(flowledger("source", "add", "clock", "--stdio", clock_line(), "--db", sqlite_db, "--json"))
    probed = ok(flowledger("source", "probe", "clock", "--db", sqlite_db, "--json"))
    async with SourceSession(
        StdioSource(time_command(), ["--local-timezone", "Etc/UTC"]), errlog=DEVNULL
    ) as session:
        expected = {tool.name: tool.to_json() for tool in await session.list_tools()}
    assert {tool["name"]: tool for tool in probed["tools"]} == expected
    assert probed["source"]["source"] == "clock" and probed["source"]["revision"] == 1
    assert probed["server"]["name"] == "mcp-time"

    shown = ok(flowledger("source", "show", "clock", "--db", sqlite_db, "--json"))
    last = shown["last_probe"]
    assert (last["ok"], last["revision"], last["error"]) == (True, 1, None)
    assert last["probed_at"] == probed["probed_at"]
    assert {
        tool["name"]: (tool["contract_fingerprint"], tool["full_fingerprint"])
        for tool in last["tools"]
    } == {
        name: (tool["contract_fingerprint"], tool["full_fingerprint"])
        for name, tool in expected.items()
    }
    listed = ok(flowledger("source", "list", "--db", sqlite_db, "--json"))["sources"]
    assert listed[0]["last_probe"]["tool_count"] == 2 and listed[0]["last_probe"]["ok"]
    table = flowledger("source", "show", "clock", "--db", sqlite_db)
    assert "get_current_time" in table.stdout and ": ok, server mcp-time" in table.stdout

    url = f"http://127.0.0.1:{free_port()}/mcp"
    ok(flowledger("source", "add", "gone", "--url", url, "--db", sqlite_db, "--json"))
    one_line_error(
        flowledger("source", "probe", "gone", "--timeout", "5", "--db", sqlite_db),
        "source 'gone' revision 1 did not answer",
        "is unreachable",
        "recorded as its last probe",
    )
    failed = ok(flowledger("source", "show", "gone", "--db", sqlite_db, "--json"))["last_probe"]
    assert (failed["ok"], failed["tools"]) == (False, [])
    assert "unreachable" in failed["error"]


# -- remove ----------------------------------------------------------------------------------------


def deployment_of(source: str) -> dict[str, Any]:
    return {
        "format": "flowledger.deployment/v1",
        "name": "env_dep",
        "artifact": {"name": "pinned_env", "version": "1"},
        "sources": {"env": {"source": source, "allow_tools": ["whoami", "secret_digest"]}},
    }


async def test_remove_is_refused_while_a_paused_run_is_pinned(db: str, tmp_path: Path) -> None:
    """A paused deployed run bound to ``source: envsrc`` keeps the source registered:
    ``remove`` names the run and writes nothing; ``show`` lists the run; once the run is
    cancelled, ``remove`` unregisters the source."""
    script = server_script(tmp_path)
    added = await asyncio.to_thread(
        flowledger, "source", "add", "envsrc", "--stdio", str(script), "--env", "LABEL=one",
        "--db", db, "--json",
    )  # fmt: skip
    assert ok(added)["revision"] == 1
    async with service(db) as (deploy, store):
        await prepared(deploy, deployment_of("envsrc"))
        started = await deploy.run_deployment("env_dep", {})
        assert started["status"] == "interrupted", started
        run_id = started["run_id"]

        before = await snapshot(store)
        refused = await asyncio.to_thread(flowledger, "source", "remove", "envsrc", "--db", db)
        one_line_error(refused, "source 'envsrc' is used by 1 unfinished pinned run(s)", run_id)
        assert await snapshot(store) == before
        shown = ok(
            await asyncio.to_thread(flowledger, "source", "show", "envsrc", "--db", db, "--json")
        )
        assert shown["runs"] == [{"session_id": SESSION, "run_id": run_id, "status": "interrupted"}]

        cancelled = await deploy.tools.call("workflow_run_cancel", {"run_id": run_id})
        assert cancelled["run_status"] == "cancelled"
    removed = await asyncio.to_thread(
        flowledger, "source", "remove", "envsrc", "--db", db, "--json"
    )
    assert ok(removed) == {"name": "envsrc", "removed": True}
    listed = ok(await asyncio.to_thread(flowledger, "source", "list", "--db", db, "--json"))
    assert listed == {"sources": []}
    one_line_error(
        await asyncio.to_thread(flowledger, "source", "show", "envsrc", "--db", db),
        "source 'envsrc' is not registered",
    )


# -- bad input ------------------------------------------------------------------------------------


def test_refusals_are_one_line_errors_and_write_nothing(sqlite_db: str, tmp_path: Path) -> None:
    ok(flowledger("source", "add", "clock", "--stdio", clock_line(), "--db", sqlite_db, "--json"))
    (tmp_path / "bad.yaml").write_text(
        "format: flowledger.source/v1\nname: bad\nstdio: {command: x}\nhttp: {url: 'http://x'}\n"
    )
    (tmp_path / "broken.yaml").write_text("format: flowledger.source/v1\nname: [\n")
    (tmp_path / "reserved.yaml").write_text(
        "format: flowledger.source/v1\nname: leak\nstdio:\n  command: x\n"
        "  env: {T: {secret: FLOWLEDGER_MCP_TOKENS}}\nsecrets: {FLOWLEDGER_MCP_TOKENS: {}}\n"
    )
    files = {name: str(tmp_path / f"{name}.yaml") for name in ("bad", "broken", "reserved")}
    cases: list[tuple[tuple[str, ...], list[str]]] = [
        (
            ("add", files["bad"]),
            ["bad.yaml: invalid source", "exactly one of stdio, http, python, builtin and openapi"],
        ),
        (("add", files["broken"]), ["broken.yaml: invalid source", "line 3"]),
        (("add", files["reserved"]), ["FLOWLEDGER_MCP_TOKENS", "server's own configuration"]),
        (("add", str(tmp_path / "missing.yaml")), ["no such file", "NAME with --stdio or --url"]),
        (("add", "Clock2", "--stdio", "x"), ["invalid source: name"]),
        (("add", "two", "--stdio", "x", "--session", "nope"), ["invalid source: sessions[0]"]),
        (
            ("add", "two", "--stdio", "x", "--env", "K=secret:undeclared"),
            ["secret undeclared is referred to but not declared", "--secret NAME"],
        ),
        (("add", "clock", "--stdio", "x"), ["source 'clock' is already registered"]),
        (("set", "nothing", "--stdio", "x"), ["source 'nothing' is not registered"]),
        (("show", "nothing"), ["source 'nothing' is not registered"]),
        (("show", "clock", "--revision", "7"), ["source 'clock' revision 7 is not registered"]),
        (("disable", "nothing"), ["source 'nothing' is not registered"]),
        (("remove", "nothing"), ["source 'nothing' is not registered"]),
        (("probe", "nothing"), ["source 'nothing' is not registered"]),
    ]
    before = stored(sqlite_db)
    for args, fragments in cases:
        one_line_error(flowledger("source", *args, "--db", sqlite_db), *fragments)
    assert stored(sqlite_db) == before
    missing = f"sqlite:///{tmp_path / 'nothing.db'}"
    one_line_error(flowledger("source", "list", "--db", missing), "no database at")
    assert not (tmp_path / "nothing.db").exists()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("add", "x", "--stdio", "a", "--url", "http://127.0.0.1:1/mcp"), "exactly one"),
        (("add", "x", "--url", "http://127.0.0.1:1/mcp", "--env", "A=b"), "need --stdio"),
        (("add", "x", "--stdio", "a", "--header", "A=b"), "--header needs --url"),
        (("add", "x", "--stdio", "a", "--env", "A"), "NAME=VALUE or NAME=secret:SECRET"),
        (("add", "x", "--stdio", "a", "--env", "A=1", "--env", "A=2"), "A is given twice"),
        (("add", "x", "--stdio", "'unbalanced"), "cannot split the command line"),
        (("add", "x", "--stdio", "a", "--secret", "=V"), "SECRET or SECRET=VARIABLE"),
        (
            ("add", "file.yaml", "--env", "A=b"),
            "describe a source only with --stdio, --url, --python, --builtin or --openapi",
        ),
        (("add", "x", "--python", "m", "--url", "http://127.0.0.1:1/mcp"), "exactly one"),
        (("add", "x", "--builtin", "--env", "A=b"), "go with --stdio or --url"),
        (("add", "x", "--python", "m:a,"), "MODULE or MODULE:FUNCTION,FUNCTION"),
        (("add", "x", "--stdio", "a", "--idempotent", "f"), "annotate functions of --python"),
        (("set", "x", "--stdio", "a", "--expect", "0"), "--expect"),
        (("probe", "clock", "--stdio", "a"), "not both"),
        (("probe", "--stdio", "a", "--db", "sqlite:///x.db"), "--db goes with"),
        (("show", "clock", "--revision", "0"), "--revision"),
        (("migrate", "--session", "nope"), "not a lowercase UUID"),
    ],
)
def test_bad_options_are_usage_errors(args: tuple[str, ...], fragment: str, tmp_path: Path) -> None:
    done = CliRunner().invoke(
        app, ["source", *args, "--db", f"sqlite:///{tmp_path / 'u.db'}"], env={"COLUMNS": "200"}
    )
    assert done.exit_code == 2, done.output
    assert fragment in " ".join(done.stderr.replace("│", " ").split())
    assert not (tmp_path / "u.db").exists()


def test_source_commands_have_help() -> None:
    done = CliRunner().invoke(app, ["source", "--help"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    for command in (
        "add",
        "set",
        "list",
        "show",
        "enable",
        "disable",
        "remove",
        "probe",
        "migrate",
    ):
        assert command in done.stdout
    added = CliRunner().invoke(app, ["source", "add", "--help"], env={"COLUMNS": "200"})
    options = "--stdio --url --env --header --secret --session --allow-tool --call-tool"
    for option in [*options.split(), "--description", "--db", "--json"]:
        assert option in added.stdout
