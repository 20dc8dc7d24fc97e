"""The examples run exactly as the README documents them: the CLI as a child process in
the example's directory, and the MCP server through the SDK client."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from .mcp.conftest import error_text, payload, wait_status

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
APP = "research_agent:catalog"
QUESTION = '{"question": "How do durable agent workflows checkpoint?"}'
FLOWLEDGER = str(Path(sys.executable).with_name("flowledger"))

DOCUMENTED = [
    "cd examples",
    f"flowledger start research v1 --app {APP} --input '{QUESTION}'",
    f"flowledger definitions --app {APP}",
    f"flowledger resume RUN --app {APP} --payload "
    """'{"approved": false, "feedback": "shorter, please"}'""",
    f"""flowledger resume RUN --app {APP} --payload '{{"approved": true}}'""",
    f"flowledger runs show RUN --app {APP}",
    f"flowledger history RUN --app {APP}",
]


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    """A copy of examples/, so the default database (flowledger.db) lands in tmp_path."""
    copy = tmp_path / "examples"
    shutil.copytree(ROOT / "examples", copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def flowledger(cwd: Path, command: str, run_id: str = "") -> subprocess.CompletedProcess[str]:
    """Run one documented command line (``RUN`` replaced by ``run_id``) in ``cwd``."""
    argv = shlex.split(command.replace("RUN", run_id))
    assert argv[0] == "flowledger"
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWLEDGER_DB", "PYTHONPATH")}
    env["COLUMNS"] = "120"
    return subprocess.run(
        [FLOWLEDGER, *argv[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_readme_documents_these_commands() -> None:
    text = README.read_text(encoding="utf-8")
    for command in DOCUMENTED:
        assert command in text, command
    assert '"args": ["mcp", "--app", "research_agent:catalog"]' in text


def test_the_research_agent_through_the_cli(examples: Path) -> None:
    _, start, listing, revise, approve, show, history = DOCUMENTED

    started = flowledger(examples, start)
    assert started.returncode == 0, started.stderr
    run_id = re.search(r"started run ([0-9a-f-]{36})", started.stdout).group(1)  # type: ignore[union-attr]
    lines = started.stdout.splitlines()
    vertex_lines = [line for line in lines if line.startswith("  ✓ ")]
    # plan, both searches in one step, then draft and critique twice: the critique's
    # route sent the first draft back
    assert [line.split()[1] for line in vertex_lines] == [
        "plan",
        "paper",
        "web",
        "draft",
        "critique",
        "draft",
        "critique",
    ]
    assert "(failed once, retried)" in next(line for line in vertex_lines if "web search" in line)
    # a loop: steps, not a count of vertices out of a total that the loop passes
    assert re.search(r"\b\d+/7\b", started.stdout) is None
    assert [re.search(r"step (\d+)", line).group(1) for line in vertex_lines] == [  # type: ignore[union-attr]
        "1",
        "2",
        "2",
        "3",
        "4",
        "5",
        "6",
    ]
    # the retry note does not shift the columns after it
    assert len({line.index("+") for line in vertex_lines}) == 1, vertex_lines
    assert "waiting at human approval" in started.stdout
    assert "Send this answer?" in started.stdout
    assert (examples / "flowledger.db").is_file()

    listed = flowledger(examples, listing)
    assert listed.returncode == 0, listed.stderr
    assert "research" in listed.stdout and "question*" in listed.stdout

    revised = flowledger(examples, revise, run_id)
    assert revised.returncode == 0, revised.stderr
    assert [line.split()[1] for line in revised.stdout.splitlines() if "✓" in line] == [
        "human",
        "draft",
        "critique",
    ]
    assert "is interrupted (draft 3, waiting for approval)" in revised.stdout

    approved = flowledger(examples, approve, run_id)
    assert approved.returncode == 0, approved.stderr
    assert f"run {run_id} is completed (published after 3 draft(s))" in approved.stdout

    shown = flowledger(examples, show + " --json", run_id)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["run_status"] == "completed"

    # the history of a loop: revisions, no "completed out of total" column
    for command in (history, history.replace(f" --app {APP}", "")):
        listed_history = flowledger(examples, command, run_id)
        assert listed_history.returncode == 0, listed_history.stderr
        assert "vertex_completed" in listed_history.stdout
        assert "progress" not in listed_history.stdout
        assert re.search(r"\b\d+/7\b", listed_history.stdout) is None


async def test_the_research_agent_through_mcp(examples: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWLEDGER_DB", "PYTHONPATH")}
    params = StdioServerParameters(
        command=FLOWLEDGER, args=["mcp", "--app", APP], cwd=str(examples), env=env
    )
    async with Client(params) as client:
        definitions = payload(await client.call_tool("workflow_definition_list", {}))
        assert [(d["name"], d["version"]) for d in definitions["definitions"]] == [
            ("research", "v1")
        ]
        refused = await client.call_tool(
            "workflow_run_start",
            {
                "definition_name": "research",
                "definition_version": "v1",
                "input": {"question": "ok", "max_rounds": 0},
            },
        )
        assert error_text(refused) == (
            "workflow tools: invalid input: $.max_rounds: 0 is less than the minimum 1; "
            "$.question: shorter than 3 characters"
        )
        started = payload(
            await client.call_tool(
                "workflow_run_start",
                {
                    "definition_name": "research",
                    "definition_version": "v1",
                    "input": json.loads(QUESTION),
                },
            )
        )
        run_id = started["run_id"]
        paused = await wait_status(client, run_id, "interrupted", within=60)
        assert paused["status_summary"] == "draft 2, waiting for approval"
        # a revision goes round the loop again: progress keeps advancing past the
        # saturated count of 7 vertices (which the first segment already reached)
        updates: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            updates.append((progress, total, message))

        revised = payload(
            await client.call_tool(
                "workflow_run_resume",
                {"run_id": run_id, "resume": {"approved": False, "feedback": "shorter"}},
                progress_callback=on_progress,
            )
        )
        assert revised["run_status"] == "interrupted"
        completions = [update for update in updates if str(update[2]).startswith("vertex_")]
        assert [message for _, _, message in completions] == [
            "vertex_completed human approval",
            "vertex_completed draft",
            "vertex_completed critique",
        ]
        values = [progress for progress, _, _ in updates]
        assert values == sorted(set(values)), "progress must increase"
        assert [total for _, total, _ in completions] == [None, None, None]
        resumed = payload(
            await client.call_tool(
                "workflow_run_resume", {"run_id": run_id, "resume": {"approved": True}}
            )
        )
        assert resumed["run_id"] == run_id
        done = await wait_status(client, run_id, "completed", within=60)
        assert done["status_summary"] == "published after 3 draft(s)"
