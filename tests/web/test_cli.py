"""``flowledger web`` as a subprocess: what it refuses before listening."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .servers import cli, web_server

pytestmark = pytest.mark.slow


def test_non_loopback_without_tokens_is_refused(tmp_path: Path) -> None:
    done = cli(tmp_path / "a.db", "web", "--host", "0.0.0.0", "--port", "0")
    assert done.returncode == 1
    assert "error: refusing to serve on non-loopback address '0.0.0.0' without tokens" in (
        done.stderr
    )


def test_a_tokens_file_others_can_write_is_refused(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("a-long-enough-token-123\n")
    os.chmod(tokens, 0o666)
    done = cli(tmp_path / "a.db", "web", "--tokens-file", str(tokens), "--port", "0")
    assert done.returncode == 1
    assert "writable by group or others" in done.stderr
    assert "a-long-enough-token-123" not in done.stderr


def test_a_session_owned_elsewhere_is_refused_but_read_only_serves(tmp_path: Path) -> None:
    db = tmp_path / "owned.db"
    with web_server(db):
        done = cli(db, "web", "--port", "0")
        assert done.returncode == 1
        assert "is owned by another process" in done.stderr
        assert "--read-only" in done.stderr
        with web_server(db, "--read-only") as url:
            assert url.startswith("http://127.0.0.1:")


def test_read_only_needs_an_existing_database(tmp_path: Path) -> None:
    done = cli(tmp_path / "missing.db", "web", "--read-only", "--port", "0")
    assert done.returncode == 1
    assert "error:" in done.stderr
    assert not (tmp_path / "missing.db").exists()
