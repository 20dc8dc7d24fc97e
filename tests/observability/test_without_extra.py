"""Without the ``prometheus`` extra: simulated in child processes whose ``sitecustomize``
makes ``import prometheus_client`` fail. Runs still run; asking for metrics
(``--metrics-port``, ``/metrics``) answers an error naming the extra, and writes nothing.
And with the extra installed, nothing imports it until metrics are asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DEADLINE = 120.0  # only catches a hang

BLOCKER = """
import sys


class _NoPrometheus:
    def find_spec(self, name, path=None, target=None):
        if name == "prometheus_client" or name.startswith("prometheus_client."):
            raise ImportError(f"No module named {name!r} (blocked by the test)")
        return None


sys.meta_path.insert(0, _NoPrometheus())
"""

DASHBOARD = """
import sys
from starlette.testclient import TestClient
from flowledger.host import load_catalog
from flowledger.web import Dashboard, Gate, SessionPool

pool = SessionPool(sys.argv[1], load_catalog(None), read_only=False)
app = Dashboard(pool, Gate({}, loopback=True), read_only=False).asgi_app()
with TestClient(app, base_url="http://127.0.0.1") as client:
    answer = client.get("/metrics")
    runs = client.get("/runs")
    client.portal.call(pool.close)
print(answer.status_code, runs.status_code, answer.text)
print("imported" if "prometheus_client" in sys.modules else "not imported")
"""

UNUSED = """
import json, sys
import flowledger.mcp, flowledger.web
from typer.testing import CliRunner
from flowledger.cli import app
from flowledger.observability import metrics

review = json.dumps({"title": "t", "document": "One. Two."})
argv = ["start", "document_review", "v1", "--input", review, "--db", sys.argv[1], "--json"]
result = CliRunner().invoke(app, argv, catch_exceptions=False)
assert result.exit_code == 0, result.output
assert json.loads(result.stdout)["run_status"] == "interrupted"
print(metrics.enabled(), "prometheus_client" in sys.modules)
"""


def run(*args: str, blocked: Path | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWLEDGER_DB", "PYTHONPATH")}
    if blocked is not None:
        (blocked / "sitecustomize.py").write_text(BLOCKER)
        env["PYTHONPATH"] = str(blocked)
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )


def test_the_blocker_blocks(tmp_path: Path) -> None:
    probe = run("-c", "import prometheus_client", blocked=tmp_path, cwd=tmp_path)
    assert probe.returncode == 1
    assert "blocked by the test" in probe.stderr


def test_metrics_port_without_the_extra_is_a_clear_error_that_writes_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "w.db"
    args = ("-m", "flowledger", "worker", "--db", f"sqlite:///{db}", "--metrics-port", "0")
    refused = run(*args, blocked=tmp_path, cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert lines[0].startswith("error: --metrics-port: metrics need the optional 'prometheus'")
    assert "pip install 'flowledger[prometheus]'" in lines[0]
    assert not db.exists()


def test_runs_and_the_dashboard_work_without_the_extra(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/d.db"
    review = json.dumps({"title": "t", "document": "One. Two."})
    started = run(
        "-m", "flowledger", "start", "document_review", "v1", "--input", review,
        "--db", url, "--json",
        blocked=tmp_path,
        cwd=tmp_path,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["run_status"] == "interrupted"
    served = run("-c", DASHBOARD, url, blocked=tmp_path, cwd=tmp_path)
    assert served.returncode == 0, served.stderr
    first, second = served.stdout.strip().splitlines()[:1] + served.stdout.strip().splitlines()[-1:]
    assert first.startswith("501 200 metrics need the optional 'prometheus' extra"), first
    assert second == "not imported"


def test_nothing_imports_the_extra_until_metrics_are_asked_for(tmp_path: Path) -> None:
    unused = run("-c", UNUSED, f"sqlite:///{tmp_path}/u.db", blocked=None, cwd=tmp_path)
    assert unused.returncode == 0, unused.stderr
    assert unused.stdout.strip().splitlines()[-1] == "False False"
