"""``flowledger artifact schema`` and ``flowledger artifact validate``, as child processes
(and in-process through the CLI's app where only the answer matters)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
from typer.testing import CliRunner

from flowledger.cli import app

from .conftest import APPROVAL, BRIEFING, briefing_data


def flowledger(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "flowledger", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )


def test_schema_prints_a_json_schema_the_examples_match(tmp_path: Path) -> None:
    done = flowledger("artifact", "schema", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    schema: dict[str, Any] = json.loads(done.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    from flowledger.deploy import read_document

    for text in (APPROVAL, BRIEFING):
        validator.validate(read_document(text))
    bad = briefing_data()
    bad["nodes"]["compose"]["kind"] = "call"
    assert not validator.is_valid(bad)
    bad = briefing_data()
    bad["nodes"]["compose"]["typo"] = 1
    assert not validator.is_valid(bad)
    bad = briefing_data()
    bad["nodes"]["Not-An-Id"] = {"kind": "end", "outcome": "ok"}
    assert not validator.is_valid(bad)
    assert not list(tmp_path.iterdir())  # no database, no files


def test_validate_accepts_a_valid_file(tmp_path: Path) -> None:
    path = tmp_path / "approval.yaml"
    path.write_text(APPROVAL)
    done = flowledger("artifact", "validate", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("valid: approval@1.0.0 sha256:")
    done = flowledger("artifact", "validate", str(path), "--json", cwd=tmp_path)
    result = json.loads(done.stdout)
    assert result["valid"] is True and result["name"] == "approval"
    assert len(result["digest"]) == 64


def test_validate_prints_every_problem_with_its_place(tmp_path: Path) -> None:
    bad = briefing_data()
    bad["start"] = "nowhere"
    bad["nodes"]["decide"]["cases"][0]["when"] = "${ state.approved == }"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    done = flowledger("artifact", "validate", str(path), cwd=tmp_path)
    assert done.returncode == 1
    assert "2 problems" in done.stdout
    assert "start: no node 'nowhere'" in done.stdout
    assert "nodes.decide.cases[0].when: invalid JMESPath" in done.stdout
    assert "hint:" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    done = flowledger("artifact", "validate", str(path), "--json", cwd=tmp_path)
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["valid"] is False
    assert [i["place"] for i in result["issues"]] == ["nodes.decide.cases[0].when", "start"]


def test_validate_reports_duplicate_yaml_keys_and_unreadable_files(tmp_path: Path) -> None:
    path = tmp_path / "dup.yml"
    path.write_text(APPROVAL.replace("  done:\n", "  done:\n    kind: end\n", 1))
    done = flowledger("artifact", "validate", str(path), cwd=tmp_path)
    assert done.returncode == 1
    assert "nodes.done: duplicate key 'kind'" in done.stdout
    done = flowledger("artifact", "validate", str(tmp_path / "missing.yaml"), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("error: cannot read")
    done = flowledger("artifact", "validate", str(path), "--format", "toml", cwd=tmp_path)
    assert done.returncode == 1 and "--format must be yaml or json" in done.stderr


def test_the_docs_show_the_tested_examples() -> None:
    """docs/deploy.md embeds exactly the example files these tests validate and save."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    blocks = re.findall(r"```yaml\n(format: flowledger\.artifact/v1\n.*?)```", page, re.S)
    assert blocks == [APPROVAL, BRIEFING]


def test_validate_names_a_lone_surrogate_in_a_json_file(tmp_path: Path) -> None:
    """A JSON file may escape half of a surrogate pair (``\\ud800``): that text is no
    Unicode, and ``validate`` names its place (in-process, through the CLI's app)."""
    data = briefing_data()
    data["nodes"]["compose"]["label"] = "Compose"
    text = json.dumps(data).replace('"Compose"', '"Comp\\ud800ose"')
    path = tmp_path / "lone.json"
    path.write_text(text, encoding="utf-8")
    done = CliRunner().invoke(app, ["artifact", "validate", "--json", str(path)])
    assert done.exit_code == 1, done.output
    answer = json.loads(done.stdout)
    assert answer["valid"] is False
    assert [(i["place"], i["code"]) for i in answer["issues"]] == [
        ("nodes.compose.label", "not_unicode")
    ]
