"""The official MCP conformance suite (`@modelcontextprotocol/conformance`) against
``flowledger mcp --http``.

The suite's server scenarios are written against its own test server: most call fixture
tools, resources and prompts (``test_image_content``, ``test://static-text``,
``test_simple_prompt``) that a server of flowledger's shape does not have. The scenarios
that test the protocol itself apply, and every one of them must pass; the others are
listed with the reason they do not apply (docs/mcp.md, "Conformance"), and this test
checks that each still fails for that reason only, so a scenario that starts to apply is
noticed.

The suite needs Node.js 22 (newer than the machine's): the npm registry's ``node`` package
brings one into ``tests/mcp/conformance`` (``npm ci --prefix tests/mcp/conformance``,
which ``.ci/run`` does). Without it the test skips, or fails when ``CI=true``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

HERE = Path(__file__).resolve().parent / "conformance"
NODE = HERE / "node_modules" / ".bin" / "node"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
REPO = Path(__file__).resolve().parents[2]

# Scenarios that test the protocol as any server speaks it: all must pass.
APPLIES = {
    "server-initialize",
    "logging-set-level",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "resources-list",
    "dns-rebinding-protection",
}

# Scenarios built on the suite's own fixtures, with the reason each does not apply. Two
# of them "pass" by accident (an unknown tool's error answer is text, and an error):
# they are listed too, since they prove nothing about flowledger.
FIXTURES = {
    "completion-complete": "completes an argument of the fixture prompt; flowledger "
    "declares no completions",
    "tools-call-simple-text": "calls fixture tool test_simple_text (passes only because "
    "the unknown tool's error answer is text)",
    "tools-call-image": "calls fixture tool test_image_content",
    "tools-call-audio": "calls fixture tool test_audio_content",
    "tools-call-embedded-resource": "calls fixture tool test_embedded_resource",
    "tools-call-mixed-content": "calls fixture tool test_multiple_content_types",
    "tools-call-with-logging": "calls fixture tool test_tool_with_logging",
    "tools-call-error": "calls fixture tool test_error_handling (passes only because "
    "an unknown tool is an error answer)",
    "tools-call-with-progress": "calls fixture tool test_tool_with_progress",
    "tools-call-sampling": "calls fixture tool test_sampling",
    "tools-call-elicitation": "calls fixture tool test_elicitation",
    "elicitation-sep1034-defaults": "calls fixture tool test_elicitation_sep1034_defaults",
    "elicitation-sep1330-enums": "calls fixture tool test_elicitation_sep1330_enums",
    "resources-read-text": "reads fixture resource test://static-text",
    "resources-read-binary": "reads fixture resource test://static-binary",
    "resources-templates-read": "reads fixture template test://template/{id}/data",
    "resources-subscribe": "subscribes to fixture resource test://watched-resource",
    "resources-unsubscribe": "unsubscribes from fixture resource test://watched-resource",
    "prompts-list": "lists the fixture prompts; flowledger declares no prompts",
    "prompts-get-simple": "gets fixture prompt test_simple_prompt",
    "prompts-get-with-args": "gets fixture prompt test_prompt_with_arguments",
    "prompts-get-embedded-resource": "gets fixture prompt test_prompt_with_embedded_resource",
    "prompts-get-with-image": "gets fixture prompt test_prompt_with_image",
}

# What a fixture scenario's failure may say: the fixture is missing, or the method it
# needs is one flowledger does not serve. Anything else is a real failure.
FIXTURE_FAILURES = (
    "Method not found",
    "no resource 'test://",
    "not found",
    "No image content",
    "No audio content",
    "No resource content",
    "Missing image content",
    "No log notifications",
    "No progress notifications",
    "did not request sampling",
    "did not request elicitation",
)

PASSING = {"SUCCESS", "INFO", "WARNING"}

# server-<scenario>-<ISO time with dashes>, e.g. server-ping-2026-12-04T22-20-04-123Z
_FOLDER = re.compile(r"server-(?P<scenario>.+?)-\d{4}-\d{2}-\d{2}T[\d-]+Z")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} [CI=true: the conformance suite must run]", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """``flowledger mcp --http`` on loopback without tokens (the default session)."""
    port = _free_port()
    env = {
        k: v for k, v in os.environ.items() if k not in ("FLOWLEDGER_DB", "FLOWLEDGER_MCP_TOKENS")
    }
    command = [sys.executable, "-m", "flowledger.mcp", "--http", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--db", f"sqlite:///{tmp_path / 'conformance.db'}"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, "flowledger mcp --http exited"
            try:
                httpx.get(url, timeout=2.0)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "flowledger mcp --http did not listen"
                time.sleep(0.1)
        yield url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)


def _checks(results: Path) -> dict[str, list[dict[str, Any]]]:
    """Scenario name -> its checks, from the suite's output folder (one folder per
    scenario, ``server-<scenario>-<timestamp>/checks.json``)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for checks in sorted(results.glob("server-*/checks.json")):
        named = _FOLDER.fullmatch(checks.parent.name)
        assert named is not None, f"unexpected results folder {checks.parent.name}"
        found[named["scenario"]] = json.loads(checks.read_text())
    return found


def test_every_scenario_that_applies_passes(server: str, tmp_path: Path) -> None:
    if not NODE.exists() or not SUITE.exists():
        _unavailable(
            "the MCP conformance suite is not installed (run: npm ci --prefix "
            "tests/mcp/conformance)"
        )
    results = tmp_path / "results"
    finished = subprocess.run(
        [str(NODE), str(SUITE), "server", "--url", server, "--output-dir", str(results)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    print(finished.stdout[finished.stdout.find("=== SUMMARY ===") :])
    found = _checks(results)
    assert set(found) == APPLIES | set(FIXTURES), "the suite's scenarios changed"
    for scenario in sorted(APPLIES):
        failed = [c for c in found[scenario] if c.get("status") not in PASSING]
        assert not failed, f"{scenario}: {failed}"
    for scenario, reason in FIXTURES.items():
        for check in found[scenario]:
            if check.get("status") in PASSING:
                continue
            message = str(check.get("errorMessage", ""))
            assert any(part in message for part in FIXTURE_FAILURES), (
                f"{scenario} ({reason}) failed for another reason: {message}"
            )
