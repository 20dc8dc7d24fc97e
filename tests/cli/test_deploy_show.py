"""``flowledger deploy show``: every binding is shown whole, a long command wrapped over
lines, never cut (in-process through typer's CliRunner; nothing is started)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from ..deploy.servers import REPO
from .conftest import Cli

LONG_ARGS = [
    "--local-timezone",
    "Etc/UTC",
    "--config",
    "/srv/flowledger/config/" + "nested-directory/" * 6 + "clock-settings.json",
    "--label",
    "the end of the command line",
]


def test_show_prints_the_bound_command_whole(cli: Cli, tmp_path: Path) -> None:
    saved = cli("artifact", "save", str(REPO / "examples" / "clock.yaml"))
    assert saved.exit_code == 0, saved.output
    deployment = {
        "format": "flowledger.deployment/v1",
        "name": "long_clock",
        "artifact": {"name": "what_time", "version": "1"},
        "sources": {
            "clock": {
                "stdio": {
                    "command": "/opt/some/rather/long/installation/prefix/bin/mcp-server-time",
                    "args": LONG_ARGS,
                    "env": {"TZ_TOKEN": {"secret": "CLOCK_TZ_TOKEN"}},
                },
                "allow_tools": ["get_current_time"],
            }
        },
    }
    document = tmp_path / "long.json"
    document.write_text(json.dumps(deployment))
    saved = cli("deploy", "set", str(document))
    assert saved.exit_code == 0, saved.output

    shown = cli("deploy", "show", "long_clock")
    assert shown.exit_code == 0, shown.output
    command = shlex.join([deployment["sources"]["clock"]["stdio"]["command"], *LONG_ARGS])
    assert len(command) > 120  # longer than any terminal line here
    flat = "".join(shown.output.split())
    assert "stdio" + "".join(command.split()) in flat, shown.output
    assert "…" not in shown.output
    assert 'allow_tools:["get_current_time"]' in flat
    assert 'env:{"TZ_TOKEN":{"secret":"CLOCK_TZ_TOKEN"}}' in flat
