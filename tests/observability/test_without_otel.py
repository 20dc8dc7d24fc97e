"""Without the ``otel`` extra: the command line runs a whole workflow (parallel vertices, a
pause, a resume by a new process) importing no ``opentelemetry`` module at all, and asking
for traces is a typed error naming the extra that writes nothing. Each case runs in a
fresh interpreter whose imports of ``opentelemetry`` fail, as if it were not installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .app import REPO

# Run before flowledger: opentelemetry (or only its SDK and exporters) cannot be imported;
# then the command line, then a report of the opentelemetry modules that were imported.
_WRAPPER = """
import importlib.abc, json, sys
blocked = tuple(json.loads(sys.argv[1]))
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.startswith(blocked):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Absent())
sys.argv = ["flowledger", *sys.argv[2:]]
from flowledger.cli import main
try:
    main()
    code = 0
except SystemExit as exit:
    code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
print("\\n" + json.dumps({"code": code, "opentelemetry": loaded}))
sys.exit(code)
"""


def flowledger(
    blocked: list[str], *args: str, cwd: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, json.dumps(blocked), *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,  # only catches a hang
        check=False,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return done, report


def test_a_workflow_runs_with_no_opentelemetry_module_imported(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'demo.db'}"
    done, report = flowledger(["opentelemetry"], "demo", cwd=tmp_path, env={"FLOWLEDGER_DB": db})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Final status: completed (published)" in done.stdout
    assert report == {"code": 0, "opentelemetry": []}


def test_asking_for_traces_without_the_extra_names_it_and_writes_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "never.db"
    done, report = flowledger(
        ["opentelemetry.sdk", "opentelemetry.exporter"],
        "runs",
        "list",
        "--db",
        f"sqlite:///{db}",
        cwd=tmp_path,
        env={"FLOWLEDGER_TRACES": "otlp"},
    )
    assert report["code"] == 2, done.stdout + done.stderr
    assert "FLOWLEDGER_TRACES=otlp needs the otel extra" in done.stderr
    assert "pip install 'flowledger[otel]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not db.exists()


def test_an_unknown_trace_exporter_is_refused_by_name(tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    done, report = flowledger(
        [],
        "runs",
        "list",
        "--db",
        f"sqlite:///{db}",
        cwd=tmp_path,
        env={"FLOWLEDGER_TRACES": "jaeger"},
    )
    assert report["code"] == 2, done.stdout + done.stderr
    assert "FLOWLEDGER_TRACES='jaeger': expected 'otlp' or 'none'" in done.stderr
    assert not db.exists()


def test_asking_for_otlp_metrics_without_the_extra_names_it_and_writes_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "never.db"
    done, report = flowledger(
        ["opentelemetry.sdk", "opentelemetry.exporter"],
        *("runs", "list", "--db", f"sqlite:///{db}"),
        cwd=tmp_path,
        env={"FLOWLEDGER_METRICS": "otlp"},
    )
    assert report["code"] == 2, done.stdout + done.stderr
    assert "FLOWLEDGER_METRICS=otlp needs the otel extra" in done.stderr
    assert "pip install 'flowledger[otel]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not db.exists()
