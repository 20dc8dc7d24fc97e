"""``flowledger capability list|inspect|call|audit`` as child processes, over a SQLite
database whose registry holds mcp-server-time and server-everything."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import open_store

from .catalog_sources import clock, everything
from .servers import REPO


def flowledger(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DEBUG"}
    env["COLUMNS"] = "160"
    return subprocess.run(
        [sys.executable, "-m", "flowledger", "capability", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=180,
        check=False,
    )


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    lines = ok(done).stdout.splitlines()
    assert len(lines) == 1, done.stdout
    return json.loads(lines[0])


def one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr and "workflow tools:" not in lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def registered(tmp_path: Path) -> list[str]:
    url = f"sqlite:///{tmp_path / 'cli.db'}"

    async def add() -> None:
        async with open_store(url) as store:
            registry = SourceRegistry.over(store)
            await registry.add(clock())
            await registry.add(everything())

    asyncio.run(add())
    return ["--db", url]


def test_the_operator_searches_inspects_tries_and_reads_the_audit(tmp_path: Path) -> None:
    db = registered(tmp_path)
    table = ok(flowledger("list", "timezones", *db)).stdout.splitlines()
    assert table[0].split() == ["source", "tool", "read-only", "callable", "score", "description"]
    assert table[1].split()[:2] == ["clock", "get_current_time"]
    assert table[-1] == "2 of 2 matching tools"

    listed = as_json(flowledger("list", "--source", "everything", "--limit", "5", "--json", *db))
    assert [r["tool"] for r in listed["results"]][:2] == ["echo", "get-annotated-message"]
    assert listed["total"] == 13 and listed["next_cursor"]
    following = as_json(flowledger("list", "--cursor", listed["next_cursor"], "--source",
                                   "everything", "--limit", "5", "--json", *db))  # fmt: skip
    everything_tools = as_json(flowledger("list", "--source", "everything", "--limit", "100",
                                          "--json", *db))["results"]  # fmt: skip
    assert following["results"] == everything_tools[5:10]

    shown = as_json(flowledger("inspect", "clock", "get_current_time", "--json", *db))
    assert shown["example"] == {"arguments": {"timezone": "string"}, "valid": True}
    printed = ok(flowledger("inspect", "clock", "get_current_time", *db)).stdout
    assert "callable: yes (the server annotates it read-only)" in printed

    called = as_json(flowledger("call", "clock", "get_current_time", "--arguments",
                                '{"timezone": "Asia/Tokyo"}', "--json", *db))  # fmt: skip
    assert called["outcome"] == "ok"
    assert called["structured_content"]["timezone"] == "Asia/Tokyo"
    one_line_error(
        flowledger("call", "everything", "toggle-simulated-logging", *db),
        "not annotated read-only",
        "[call_refused]",
    )
    one_line_error(
        flowledger("call", "everything", "echo", "-a", "{}", *db), "[tool_arguments_invalid]"
    )
    one_line_error(flowledger("list", "--source", "nope", *db), "'nope' is not registered")

    audit = as_json(flowledger("audit", "--json", *db))["entries"]
    assert [(e["tool"], e["outcome"], e["transport"]) for e in audit] == [
        ("get_current_time", "started", "cli"),
        ("get_current_time", "ok", "cli"),
        ("toggle-simulated-logging", "refused", "cli"),
        ("echo", "invalid_arguments", "cli"),
    ]
    rows = ok(flowledger("audit", *db)).stdout.splitlines()
    assert rows[0].split()[:4] == ["seq", "at", "via", "source"] and len(rows) == 5


def test_bad_usage_and_a_missing_database(tmp_path: Path) -> None:
    db = registered(tmp_path)
    one_line_error(flowledger("call", "clock", "get_current_time", "-a", "{nope", *db),
                   "--arguments is not valid JSON")  # fmt: skip
    not_object = flowledger("call", "clock", "get_current_time", "-a", "[1]", *db)
    assert not_object.returncode == 2 and "expected a JSON object" in not_object.stderr
    assert flowledger("list", "--limit", "0", *db).returncode == 2
    missing = ["--db", f"sqlite:///{tmp_path / 'missing.db'}"]
    one_line_error(flowledger("audit", *missing), "no database")
    assert not (tmp_path / "missing.db").exists()
