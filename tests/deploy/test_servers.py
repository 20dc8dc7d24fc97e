"""The real-server fixtures skip with a reason when a server is not installed, and fail
instead when CI=true (so CI cannot pass without running the real-server tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import servers


def test_without_node_the_tests_skip_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(pytest.skip.Exception, match="node is not installed"):
        servers.node_command()


def test_without_the_package_the_tests_skip_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(servers, "EVERYTHING", tmp_path / "missing" / "index.js")
    with pytest.raises(pytest.skip.Exception, match="npm ci --prefix tests/deploy/npm"):
        servers.everything_stdio()


def test_with_ci_true_a_missing_server_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("PATH", "")
    with pytest.raises(pytest.fail.Exception, match=r"CI=true"):
        servers.node_command()
    monkeypatch.setattr(servers.sys, "executable", str(tmp_path / "python"))
    with pytest.raises(pytest.fail.Exception, match="mcp-server-time is not installed"):
        servers.time_command()
