"""``flowledger artifact save|list|show``, ``flowledger deploy``, ``flowledger inspect``
and ``flowledger trace`` as subprocesses over one SQLite file: save an artifact and a
deployment, check it (exit 1 while unrunnable, the database unchanged), a refused start
(exit 1, diagnostics, no run), a run that pauses, a resume blocked while the pinned
command is gone (exit 1) and completed once it is back, each step in a new process;
inspect, trace, show, list and rollback."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .runs.app import HERE as RUNS
from .servers import REPO
from .test_deployed_runs import deployment, server_script

# the commands of ``flowledger deploy``; the others are given whole (``artifact save``)
_TOP_LEVEL = ("artifact", "inspect", "trace")


def cli(*args: str, db: str, as_json: bool = True) -> subprocess.CompletedProcess[str]:
    extra = ["--json"] if as_json else []
    command = list(args) if args[0] in _TOP_LEVEL else ["deploy", *args]
    return subprocess.run(
        [sys.executable, "-m", "flowledger", *command, "--db", db, *extra],
        cwd=REPO,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def ok(*args: str, db: str) -> Any:
    result = cli(*args, db=db)
    assert result.returncode == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def test_a_deployment_runs_pauses_blocks_and_resumes_from_new_processes(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    script = server_script(tmp_path)
    saved = ok("artifact", "save", str(RUNS / "pinned_env.yaml"), db=db)
    assert (saved["name"], saved["version"]) == ("pinned_env", "1")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(deployment(script)))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(deployment(script, allow=("whoami",))))
    assert ok("set", str(bad), db=db)["revision"] == 1

    refused = cli("run", "env_dep", db=db)
    assert refused.returncode == 1, refused.stderr
    answer = json.loads(refused.stdout)
    assert answer["status"] == "unrunnable"
    assert [d["code"] for d in answer["diagnostics"]] == ["tool_not_allowed"]

    assert ok("set", str(good), db=db)["revision"] == 2
    started = ok("run", "env_dep", "--input", "{}", db=db)
    assert (started["status"], started["deployment"]["revision"]) == ("interrupted", 2)
    run_id = started["run_id"]

    script.unlink()
    blocked = cli("resume", run_id, "--payload", '{"go": true}', db=db)
    assert blocked.returncode == 1, blocked.stderr
    assert json.loads(blocked.stdout)["resume_readiness"]["status"] == "blocked"
    server_script(tmp_path)
    assert ok("inspect", run_id, db=db)["resume_readiness"] == {"status": "ready"}
    done = ok("resume", run_id, "--payload", '{"go": true}', db=db)
    assert (done["status"], done["output"]["label"]) == ("completed", "one")

    page = ok("trace", run_id, "--start", "2", "--limit", "2", db=db)
    assert page["total"] == 5 and [e["node"] for e in page["entries"]] == ["who", "digest"]
    # `--start` and `seq` count from the same 0: the page from 2 shows entries 2 and 3
    assert [e["seq"] for e in page["entries"]] == [2, 3]
    assert (page["run_id"], page["start"]) == (run_id, 2) and set(page) == {
        "run_id",
        "start",
        "total",
        "entries",
    }
    assert ok("list", db=db) == {
        "deployments": [{"name": "env_dep", "live": 2, "revisions": 2}],
        "next": None,
    }
    assert ok("show", "env_dep", "--revision", "1", db=db)["live"] is False
    assert ok("rollback", "env_dep", db=db)["revision"] == 1
    missing = cli("show", "nothing_here", db=db)
    assert missing.returncode == 1 and "does not exist" in missing.stderr


def test_reading_commands_never_create_a_database(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    for args in (
        ["list"],
        ["show", "env_dep"],
        ["inspect", "0" * 8 + "-0000-4000-8000-" + "0" * 12],
    ):
        result = cli(*args, db=f"sqlite:///{path}")
        assert result.returncode == 1, (args, result.stdout)
        assert "no database" in result.stderr, result.stderr
    assert not path.exists()


def human(*args: str, db: str) -> str:
    result = cli(*args, db=db, as_json=False)
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result.stdout


def test_without_json_the_commands_print_summaries_and_tables(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'human.db'}"
    script = server_script(tmp_path)
    assert "saved artifact pinned_env@1" in human(
        "artifact", "save", str(RUNS / "pinned_env.yaml"), db=db
    )
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(deployment(script, allow=("whoami",))))
    assert "saved env_dep revision 1 (live)" in human("set", str(bad), db=db)
    refused = cli("run", "env_dep", db=db, as_json=False)
    assert refused.returncode == 1, refused.stderr
    assert "unrunnable: nothing was started" in refused.stdout
    assert "tool_not_allowed" in refused.stdout
    good = tmp_path / "good.json"
    good.write_text(json.dumps(deployment(script)))
    human("set", str(good), db=db)

    listing = human("list", db=db).splitlines()
    assert listing[0].strip() == "Deployments"
    assert listing[1].split() == ["name", "live", "revision", "revisions"]
    assert [line.split() for line in listing[3:]] == [["env_dep", "2", "2"]]
    shown = human("show", "env_dep", "--revision", "1", db=db)
    assert "env_dep revision 1 (not live)" in shown and "pinned_env@1" in shown

    started = human("run", "env_dep", db=db)
    run_id = started.split()[1]
    assert started.split()[:3] == ["run", run_id, "interrupted"]
    assert "deployment env_dep revision 2" in started
    assert f"flowledger deploy resume {run_id} --payload" in started
    inspected = human("inspect", run_id, db=db)
    assert "ready" in inspected and "interrupted" in inspected
    done = human("resume", run_id, "--payload", '{"go": true}', db=db)
    assert done.split()[:3] == ["run", run_id, "completed"]
    assert "outcome" in done and '"label": "one"' in done

    trace = human("trace", run_id, "--limit", "2", db=db).splitlines()
    assert trace[0].strip() == "Trace: 2 of 5 entries, from --start 0"
    assert trace[1].split()[:4] == ["#", "time", "node", "kind"]
    assert [line.split()[0] for line in trace[3:5]] == ["0", "1"]  # the "#" column from 0
    assert f"more: flowledger trace {run_id} --start 2 --db {db}" in trace[-1]
    assert "live now: env_dep revision 1 (live)" in human("rollback", "env_dep", db=db)


def test_json_is_one_line_a_script_parses(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'json.db'}"
    saved = cli("artifact", "save", str(RUNS / "pinned_env.yaml"), db=db)
    assert saved.returncode == 0, saved.stderr
    assert saved.stdout.count("\n") == 1
    assert json.loads(saved.stdout)["name"] == "pinned_env"
    listed = cli("list", db=db)
    assert json.loads(listed.stdout) == {"deployments": [], "next": None}
    assert human("list", db=db).strip() == "No deployments."


def test_run_on_a_terminal_shows_a_spinner_while_the_run_executes(tmp_path: Path) -> None:
    """stdout a pseudo-terminal: ``deploy run`` shows what it waits for, then the summary."""
    import pty

    db = f"sqlite:///{tmp_path / 'tty.db'}"
    script = server_script(tmp_path)
    ok("artifact", "save", str(RUNS / "pinned_env.yaml"), db=db)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(deployment(script)))
    ok("set", str(good), db=db)
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "flowledger", "deploy", "run", "env_dep", "--db", db],
        cwd=REPO,
        env={**os.environ, "TERM": "xterm", "COLUMNS": "120"},
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=subprocess.PIPE,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(180) == 0, process.stderr.read() if process.stderr else ""
    screen = b"".join(chunks).decode(errors="replace")
    assert "running env_dep..." in screen
    assert "interrupted" in screen and "resume with:" in screen


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_check_validates_the_live_revision_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "check.db"
    db = f"sqlite:///{path}"
    script = server_script(tmp_path)
    ok("artifact", "save", str(RUNS / "pinned_env.yaml"), db=db)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(deployment(script, allow=("whoami",))))
    ok("set", str(bad), db=db)

    before = _digest(path)
    refused = cli("check", "env_dep", db=db)
    assert refused.returncode == 1, refused.stderr
    answer = json.loads(refused.stdout)
    assert (answer["status"], answer["revision"]) == ("unrunnable", 1)
    assert [d["code"] for d in answer["diagnostics"]] == ["tool_not_allowed"]
    printed = cli("check", "env_dep", db=db, as_json=False)
    assert printed.returncode == 1
    assert "env_dep revision 1: unrunnable" in printed.stdout
    assert "tool_not_allowed" in printed.stdout
    missing = cli("check", "nothing_here", db=db)
    assert missing.returncode == 1
    assert [d["code"] for d in json.loads(missing.stdout)["diagnostics"]] == ["deployment_missing"]
    assert _digest(path) == before

    good = tmp_path / "good.json"
    good.write_text(json.dumps(deployment(script)))
    ok("set", str(good), db=db)
    before = _digest(path)
    runnable = ok("check", "env_dep", db=db)
    assert (runnable["status"], runnable["revision"], runnable["diagnostics"]) == (
        "runnable",
        2,
        [],
    )
    assert "env_dep revision 2: runnable" in human("check", "env_dep", db=db)
    assert _digest(path) == before


def test_artifact_save_list_and_show(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'artifacts.db'}"
    saved = ok("artifact", "save", str(RUNS / "pinned_env.yaml"), db=db)
    listed = ok("artifact", "list", db=db)
    [entry] = listed["artifacts"]
    assert entry["name"] == "pinned_env"
    assert [(v["version"], v["digest"]) for v in entry["versions"]] == [("1", saved["digest"])]
    shown = ok("artifact", "show", "pinned_env", "1", db=db)
    assert shown["digest"] == saved["digest"] and shown["document"]["name"] == "pinned_env"

    table = human("artifact", "list", db=db).splitlines()
    assert table[0].strip() == "Artifacts"
    assert table[3].split()[:3] == ["pinned_env", "1", f"sha256:{saved['digest'][:12]}"]
    printed = human("artifact", "show", "pinned_env", "1", db=db)
    assert "pinned_env@1" in printed and f"sha256:{saved['digest']}" in printed
    assert '"name": "pinned_env"' in printed
    unknown = cli("artifact", "show", "pinned_env", "9", db=db)
    assert unknown.returncode == 1 and "no saved artifact pinned_env@9" in unknown.stderr
    unreadable = cli("artifact", "save", str(tmp_path / "absent.yaml"), db=db)
    assert unreadable.returncode == 1 and "cannot read" in unreadable.stderr
    assert "Traceback" not in unreadable.stderr
