"""Helpers for the CLI tests: a fresh database per test, the CLI in-process (typer's
CliRunner) or as a child process, and the tools called directly for comparison."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.cli.runtime import Options, open_host
from flowledger.examples import review
from flowledger.host import load_catalog, open_session
from flowledger.storage import open_store

REVIEW_INPUT = {"title": "Notes", "document": "The first sentence. It mentions 3 numbers."}


@contextlib.contextmanager
def hold_session(url: str) -> Iterator[None]:
    """Own the database's default session from another thread (as another process would)."""
    held = threading.Event()
    release = threading.Event()
    failure: list[BaseException] = []

    async def hold() -> None:
        async with open_session(url, load_catalog()):
            held.set()
            await asyncio.to_thread(release.wait)

    def main() -> None:
        try:
            asyncio.run(hold())
        except BaseException as exc:
            failure.append(exc)
            held.set()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    assert held.wait(10)
    assert not failure, failure
    try:
        yield
    finally:
        release.set()
        thread.join(10)


@dataclass
class Cli:
    db: str
    cwd: Path

    def __call__(self, *args: str, db: bool = True, input: str | None = None) -> Result:
        """Run ``flowledger ARGS --db URL`` in this process."""
        argv = [*args, "--db", self.db] if db else list(args)
        return CliRunner().invoke(app, argv, input=input, catch_exceptions=False)

    def json(self, *args: str) -> Any:
        result = self(*args, "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call a tool directly, as a reader of the session."""

        async def call() -> dict[str, Any]:
            async with open_host(Options(db=self.db), owner=False) as host:
                return await host.call(name, arguments)

        return asyncio.run(call())

    def process(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run ``python -m flowledger ARGS`` as a child process."""
        env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
        env["COLUMNS"] = "120"
        return subprocess.run(
            [sys.executable, "-m", "flowledger", *args],
            cwd=self.cwd,
            env=env,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=timeout,
            check=False,
        )

    def start_review(self) -> str:
        """Start a document review; it runs until the approval pauses it."""
        result = self("start", "document_review", "v1", "--input", json.dumps(REVIEW_INPUT))
        assert result.exit_code == 0, result.output
        runs = self.json("runs", "list")["runs"]
        assert runs
        latest = max(runs, key=lambda run: run["created_at"])
        assert latest["run_status"] == "interrupted"
        return str(latest["run_id"])


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    monkeypatch.delenv("FLOWLEDGER_DB", raising=False)
    monkeypatch.delenv("FLOWLEDGER_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(review, "STEP_SECONDS", 0.0)  # in-process runs need no pacing
    url = f"sqlite:///{tmp_path}/c.db"
    asyncio.run(_create(url))  # reading commands never create one
    yield Cli(url, tmp_path)


async def _create(url: str) -> None:
    async with open_store(url):
        pass


def assert_one_line_error(result: Result, *fragments: str) -> None:
    """Exit code 1, exactly one line on stderr starting with ``error:``, no traceback."""
    assert result.exit_code == 1, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert "Traceback" not in result.output
