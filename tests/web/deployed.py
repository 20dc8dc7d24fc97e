"""A deployed run for the dashboard tests: ``clock_sign_off`` (pauses for an approval,
then reads ``mcp-server-time``'s clock) deployed as ``clock_dep`` with a secret by
reference in the source's environment (its name is pinned, never its value)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from tests.deploy.servers import time_command

ARTIFACT: Final = (Path(__file__).parent / "clock_sign_off.yaml").read_text()
SECRET_NAME: Final = "FLOWLEDGER_WEB_TEST_SECRET"
SECRET_VALUE: Final = "web-s3cr3t-value-never-shown"


def deployment(command: str | None = None) -> dict[str, Any]:
    return {
        "format": "flowledger.deployment/v1",
        "name": "clock_dep",
        "artifact": {"name": "clock_sign_off", "version": "1"},
        "sources": {
            "clock": {
                "stdio": {
                    "command": command or time_command(),
                    "args": ["--local-timezone", "Etc/UTC"],
                    "env": {"WEB_TOKEN": {"secret": SECRET_NAME}},
                },
                "allow_tools": ["get_current_time"],
            }
        },
        "drift": "block",
    }
