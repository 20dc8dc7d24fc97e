"""Registered source documents (flowledger.source/v1) of the real MCP servers the
capability catalog tests use: mcp-server-time, server-everything (stdio or HTTP) and
``tests/deploy/paging_server.py`` (its listing in pages of three)."""

from __future__ import annotations

import sys
from typing import Any

from .servers import EVERYTHING, REPO, node_command, time_command

SESSION_A = "2f1e0c8a-6a43-4c39-9d55-3a4e2f7b9c10"
SESSION_B = "7d0c5b1e-3f8a-4e2b-9c61-0a5f4e3d2c1b"


def clock(**extra: Any) -> dict[str, Any]:
    return {
        "format": "flowledger.source/v1",
        "name": "clock",
        "description": "The time and time zones.",
        "stdio": {"command": time_command(), "args": ["--local-timezone", "Etc/UTC"]},
        **extra,
    }


def everything(name: str = "everything", **extra: Any) -> dict[str, Any]:
    return {
        "format": "flowledger.source/v1",
        "name": name,
        "stdio": {"command": node_command(), "args": [str(EVERYTHING), "stdio"]},
        **extra,
    }


def everything_http(url: str, **extra: Any) -> dict[str, Any]:
    return {"format": "flowledger.source/v1", "name": "everything", "http": {"url": url}, **extra}


def paging(tools: int = 7, **extra: Any) -> dict[str, Any]:
    return {
        "format": "flowledger.source/v1",
        "name": "paging",
        "stdio": {
            "command": sys.executable,
            "args": ["-m", "tests.deploy.paging_server", str(tools)],
            "cwd": str(REPO),
        },
        **extra,
    }
