"""A deployed run bound to an HTTP MCP server (server-everything over streamable HTTP)
that is stopped while the run is paused and started again on the same URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .servers import everything_http_server
from .test_deployed_runs import SESSION, codes, service

ARTIFACT: dict[str, Any] = {
    "format": "flowledger.artifact/v1",
    "name": "http_echo",
    "version": "1",
    "description": "Pause for a word, then echo it through the HTTP server.",
    "input_schema": {"type": "object", "additionalProperties": False, "properties": {}},
    "output_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["echoed"],
        "properties": {"echoed": {"type": "string"}},
    },
    "dependencies": {"everything": {"tools": ["echo"]}},
    "state": {"word": {}, "echoed": {}},
    "start": "ask",
    "nodes": {
        "ask": {
            "kind": "interrupt",
            "label": "A word",
            "request": {"question": "Which word?"},
            "resume_schema": {
                "type": "object",
                "additionalProperties": False,
                "required": ["word"],
                "properties": {"word": {"type": "string"}},
            },
            "assign": {"word": "${ resume.word }"},
            "next": "shout",
        },
        "shout": {
            "kind": "tool",
            "dependency": "everything",
            "tool": "echo",
            "arguments": {"message": "${ state.word }"},
            "assign": {"echoed": "${ result.text }"},
            "next": "done",
        },
        "done": {"kind": "end", "outcome": "echoed", "output": {"echoed": "${ state.echoed }"}},
    },
}


def deployment(url: str) -> dict[str, Any]:
    return {
        "format": "flowledger.deployment/v1",
        "name": "http_echo_dep",
        "artifact": {"name": "http_echo", "version": "1"},
        "sources": {"everything": {"http": {"url": url}, "allow_tools": ["echo"]}},
    }


async def test_an_http_source_restarted_between_pause_and_resume(tmp_path: Path) -> None:
    """Testing Strategy: pinned dependency disabled after pause: resume is blocked and
    state remains interrupted and unmodified; pinned dependency restored: later resume
    succeeds (the goal: an interrupted deployment resumes after MCP server restart).

    The pinned source is an HTTP URL: stopping its server blocks the resume with a
    diagnostic, the payload is not consumed and the run's revision does not move; the
    server started again on the same URL makes the run ready and the resume completes."""
    db = f"sqlite:///{tmp_path / 'restart.db'}"
    log = tmp_path / "everything-http.log"
    async with service(db) as (deploy, _):
        with everything_http_server(log) as (url, _process):
            await deploy.artifacts.save(SESSION, ARTIFACT)
            await deploy.deployment_save(deployment(url))
            started = await deploy.run_deployment("http_echo_dep", {}, wait_seconds=120)
            assert started["status"] == "interrupted", started
            assert started["resume_readiness"] == {"status": "ready"}
            run_id = started["run_id"]
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])

        record = await deploy.session.registry.get(SESSION, run_id)
        blocked = await deploy.resume_run(run_id, {"word": "hello"}, wait_seconds=120)
        assert blocked["resumed"] is False
        assert blocked["status"] == "interrupted"
        assert blocked["resume_readiness"]["status"] == "blocked"
        assert codes(blocked) == [("source_unreachable", "error")]
        assert url in blocked["resume_readiness"]["diagnostics"][0]["message"]
        assert blocked["interrupt"]["vertex_id"] == "ask"  # the payload was not consumed
        unchanged = await deploy.session.registry.get(SESSION, run_id)
        assert (unchanged.status, unchanged.revision) == (record.status, record.revision)
        assert unchanged.checkpoint_revision == record.checkpoint_revision
        still = await deploy.inspect_run(run_id)
        assert still["resume_readiness"]["status"] == "blocked"

        with everything_http_server(log, port=port) as (again, _process):
            assert again == url
            ready = await deploy.inspect_run(run_id, revalidate=True)
            assert ready["resume_readiness"] == {"status": "ready"}, ready
            done = await deploy.resume_run(run_id, {"word": "hello"}, wait_seconds=120)
        assert done["resumed"] is True
        assert done["status"] == "completed", done
        assert done["outcome"] == "echoed"
        assert "hello" in done["output"]["echoed"]
