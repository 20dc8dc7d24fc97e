"""The dashboard's users are tenants (issue #25), tokens or not: what the operator saved
with a command line of its own (CLI) is never started from a dashboard form. Starting a
deployment revision that binds an inline command is refused (nothing starts, nothing is
written); revalidating a run pinned to an inline command is answered blocked without
starting it, and so are the time, fork and bulk pages of that run. A registered source
still works (tests/web/test_deployed_routes.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from flowledger.web import Dashboard, Gate, SessionPool

from ..deploy.runs.app import HERE as RUNS
from ..deploy.servers import REPO
from ..deploy.test_registered_runs import marked_server, starts
from . import web_app
from .conftest import BASE, csrf


def flowledger(db: Path, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "flowledger", *args, "--db", f"sqlite:///{db}", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,  # only catches a hang
        check=False,
    )
    return json.loads(done.stdout) if done.stdout.strip() else done.returncode


def inline(name: str, stdio: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": "flowledger.deployment/v1",
        "name": name,
        "artifact": {"name": "pinned_env", "version": "1"},
        "sources": {"env": {"stdio": stdio, "allow_tools": ["whoami", "secret_digest"]}},
    }


def test_no_dashboard_form_starts_an_inline_command(tmp_path: Path) -> None:
    db = tmp_path / "web.db"
    marker = tmp_path / "forbidden-ran"
    script, counter = marked_server(tmp_path)
    artifact = tmp_path / "artifact.yaml"
    artifact.write_text((RUNS / "pinned_env.yaml").read_text())
    flowledger(db, "artifact", "save", str(artifact))
    for name, stdio in [
        ("forbidden_dep", {"command": "sh", "args": ["-c", f"id > {marker}"]}),
        ("legacy_dep", {"command": str(script), "env": {"LABEL": "inline"}}),
    ]:
        document = tmp_path / f"{name}.json"
        document.write_text(json.dumps(inline(name, stdio)))
        flowledger(db, "deploy", "set", str(document))
    paused = flowledger(db, "deploy", "run", "legacy_dep", "--input", "{}")
    assert paused["status"] == "interrupted", paused
    operator_starts = starts(counter)

    pool = SessionPool(f"sqlite:///{db}", web_app.catalog(), read_only=False)
    app = Dashboard(pool, Gate({}, loopback=True), read_only=False).asgi_app()
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        try:
            token = csrf(client, "/definitions/forbidden_dep/r1")
            refused = client.post("/definitions/forbidden_dep/r1/start", data={"csrf": token})
            assert refused.status_code == 400, refused.text
            assert "only the operator may use" in refused.text
            token = csrf(client, f"/runs/{paused['run_id']}")
            blocked = client.post(f"/runs/{paused['run_id']}/revalidate", data={"csrf": token})
            assert blocked.status_code == 200, blocked.text
            assert 'id="readiness-status">blocked<' in blocked.text
            assert "only the operator may use" in blocked.text
            # the pages that read a deployed run's trace and pin (its time page, a
            # fork's confirmation, a bulk confirmation) start nothing either
            run_id = paused["run_id"]
            assert client.get(f"/runs/{run_id}/time").status_code == 200
            assert client.get(f"/runs/{run_id}/fork?revision=0").status_code == 200
            bulk = client.get("/runs/bulk", params={"action": "retry", "run": run_id})
            assert bulk.status_code == 200
        finally:
            client.portal.call(pool.close)  # type: ignore[union-attr]
    assert not marker.exists()
    assert starts(counter) == operator_starts
    listed = flowledger(db, "runs", "list")
    assert [run["run_id"] for run in listed["runs"]] == [paused["run_id"]]
