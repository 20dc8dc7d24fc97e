"""``--log-format json`` on the HTTP servers (``flowledger web``, ``flowledger mcp --http``)
as processes: their stderr is JSON lines from the first ("serving URL") to the last, and
their ``/metrics`` answers over HTTP with the token."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ._scrape import DEADLINE, Stderr, fetch, parse

pytest.importorskip("prometheus_client")

TOKEN = "token-obs-0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("command", ["web", "mcp"])
def test_a_server_logs_json_lines_and_serves_metrics(command: str, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN}\n")
    tokens.chmod(0o600)
    port = str(_free_port()) if command == "mcp" else "0"
    args = ["web"] if command == "web" else ["mcp", "--http"]
    process = subprocess.Popen(
        [
            sys.executable, "-m", "flowledger", *args, "--db", f"sqlite:///{tmp_path}/s.db",
            "--port", port, "--tokens-file", str(tokens), "--log-format", "json",
        ],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert process.stderr is not None
    stderr = Stderr()
    reader = stderr.follow(process.stderr)
    try:
        line = stderr.wait_for(lambda text: "serving" in text, process)
        record = json.loads(line)
        assert record["event"] == "serving" and record["level"] == "warning"
        url = str(record["message"]).split(" serving ", 1)[1].split(" ", 1)[0]
        base = url.removesuffix("/mcp").rstrip("/")
        text = fetch(f"{base}/metrics", {"Authorization": f"Bearer {TOKEN}"})
        assert ("flowledger_leases_acquired_total", frozenset()) in parse(text)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=DEADLINE)
        reader.join(timeout=DEADLINE)
    for record in stderr.records():  # every line, to the last, is one JSON object
        assert {"time", "level", "event", "message"} <= record.keys()
