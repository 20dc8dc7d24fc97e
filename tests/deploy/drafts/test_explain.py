"""``explain`` has an entry for every code the deploy layer emits: the codes are collected
from the source itself (issue constructors, ``code = "..."`` class attributes, the
diagnostics constants, code-mapping functions), so a new code without an entry fails
here; and every code appears in some other test file, so a new code that no test
provokes fails here too. ``flowledger explain`` is tried as a subprocess."""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flowledger.deploy.drafts.errors import DraftError
from flowledger.deploy.drafts.explain import EXPLANATIONS, UnknownCodeError, explain
from flowledger.deploy.registry.errors import RegistryError
from flowledger.deploy.runs.errors import NodeExecutionError
from flowledger.deploy.sources.errors import SourceError

DEPLOY = Path(__file__).resolve().parents[3] / "src" / "flowledger" / "deploy"
TESTS = Path(__file__).resolve().parents[2]
# The codes of abstract base classes: every subclass replaces the code, and the class
# itself is never constructed (`test_base_codes_are_never_raised` checks both), so no
# front door can show one and no test can provoke it. They keep their explain entries.
BASE_CODES: dict[str, type[Exception]] = {
    "draft_error": DraftError,
    "registry_error": RegistryError,
    "source_error": SourceError,
    "node_failed": NodeExecutionError,
}
_CODE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")
# callables whose second positional argument is a code: ArtifactIssue(place, code, ...),
# the checkers' issue(place, code, ...), document.py's _issue, ArtifactError.__init__
_ISSUE_CALLS = {"ArtifactIssue", "_issue", "issue", "__init__"}


def _name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _literal(node: ast.AST | None) -> str | None:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and _CODE.fullmatch(node.value)
    ):
        return node.value
    return None


@functools.cache  # the source does not change while the tests run
def emitted_codes() -> dict[str, str]:
    """Every code literal of src/flowledger/deploy -> one place it is emitted."""
    found: dict[str, str] = {}
    for path in sorted(DEPLOY.rglob("*.py")):
        rel = path.relative_to(DEPLOY).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            where = f"deploy/{rel}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call) and _name(node) in _ISSUE_CALLS and len(node.args) > 1:
                code = _literal(node.args[1])
                if code:
                    found.setdefault(code, where)
            elif isinstance(node, ast.ClassDef):
                for statement in node.body:  # code = "..." / code: ClassVar[str] = "..."
                    target = (
                        statement.targets[0]
                        if isinstance(statement, ast.Assign) and len(statement.targets) == 1
                        else statement.target
                        if isinstance(statement, ast.AnnAssign)
                        else None
                    )
                    if isinstance(target, ast.Name) and target.id == "code":
                        code = _literal(statement.value)  # type: ignore[union-attr]
                        if code:
                            found.setdefault(code, where)
            elif isinstance(node, ast.FunctionDef) and node.name.endswith("code"):
                for inner in ast.walk(node):  # structure.py's _code: the pydantic mapping
                    if isinstance(inner, ast.Dict):
                        for value in inner.values:
                            if _literal(value):
                                found.setdefault(_literal(value) or "", where)
                    if isinstance(inner, ast.Return) and _literal(inner.value):
                        found.setdefault(_literal(inner.value) or "", where)
                    if (  # mapping.get(kind, "default_code")
                        isinstance(inner, ast.Call)
                        and _name(inner) == "get"
                        and len(inner.args) == 2
                        and _literal(inner.args[1])
                    ):
                        found.setdefault(_literal(inner.args[1]) or "", where)
            elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
                first = node.value.elts[0] if node.value.elts else None
                code = _literal(first)  # store.py's (code, message) problems
                if code and len(node.value.elts) == 2:
                    found.setdefault(code, where)
        if rel == "deployments/diagnostics.py":
            for statement in tree.body:
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                    code = _literal(statement.value)
                    if code and statement.target.id.isupper():
                        found.setdefault(code, where)
    return found


def test_the_collector_finds_every_kind_of_emitter() -> None:
    codes = emitted_codes()
    # one of each way a code is written, so a collector that stopped seeing one fails
    for code in (
        "unknown_node",  # graph.py: self.issue(place, "unknown_node", ...)
        "yaml_alias",  # document.py: _issue(...)
        "child_too_deep",  # store.py: ArtifactIssue(...)
        "artifact_conflict",  # errors.py: super().__init__(place, code, ...)
        "tool_timeout",  # sources/errors.py: code = "..."
        "launch_refused",  # registry/errors.py: code = "..."
        "checked_against_probe",  # diagnostics.py: a constant
        "field_unknown",  # structure.py: _code's mapping
        "bad_key",  # structure.py: _code's return
        "bad_value",  # structure.py: _code's mapping default
        "revision_conflict",  # drafts/errors.py and registry/errors.py
        "patch_test_failed",  # drafts/errors.py
    ):
        assert code in codes, code
    assert len(codes) > 100


def test_every_emitted_code_has_an_explanation() -> None:
    missing = {code: where for code, where in emitted_codes().items() if code not in EXPLANATIONS}
    assert not missing, f"codes without an explain entry: {missing}"


def test_every_entry_says_cause_fix_and_example() -> None:
    for code, (cause, fix, example) in EXPLANATIONS.items():
        assert _CODE.fullmatch(code), code
        assert cause.strip() and fix.strip() and example.strip(), code
    assert explain("revision_conflict")["code"] == "revision_conflict"
    with pytest.raises(UnknownCodeError) as caught:
        explain("no_such_code")
    assert caught.value.code == "code_unknown"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowledger", "explain", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_explain() -> None:
    shown = _cli("revision_conflict")
    assert shown.returncode == 0, shown.stderr
    assert "cause:" in shown.stdout and "fix:" in shown.stdout and "example:" in shown.stdout
    assert "someone edited first" in shown.stdout
    as_json = _cli("schema_drift", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == explain("schema_drift")
    unknown = _cli("no_such_code")
    assert unknown.returncode == 1
    assert unknown.stdout == ""
    assert "no code 'no_such_code'" in unknown.stderr


def test_base_codes_are_never_raised() -> None:
    """Each base class of `BASE_CODES` carries its code, and no code of src/ constructs
    one itself (only its subclasses, each with a code of its own): else the code would
    reach a user and need a test of its own."""
    names = {base.__name__ for base in BASE_CODES.values()}
    codes = emitted_codes()
    for code, base in BASE_CODES.items():
        assert code in codes and getattr(base, "code", None) == code, code
    source = DEPLOY.parent
    constructed: set[str] = set()
    for path in source.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _name(node) in names:
                constructed.add(f"{_name(node)} at {path.relative_to(source)}:{node.lineno}")
    assert not constructed, (
        f"a base class is raised itself, so its code needs a test: {constructed}"
    )


def test_every_emitted_code_appears_in_a_test() -> None:
    """Every code the deploy layer emits is asserted by at least one test file other than
    this one, quoted (``"code"``) or as a tool error's prefix (``[code]``): a new code
    without a test that provokes it fails here."""
    texts = [
        path.read_text(encoding="utf-8")
        for path in sorted(TESTS.rglob("*.py"))
        if path.resolve() != Path(__file__).resolve() and "node_modules" not in path.parts
    ]
    untested = {
        code: where
        for code, where in emitted_codes().items()
        if code not in BASE_CODES
        and not any(f'"{code}"' in text or f"[{code}]" in text for text in texts)
    }
    assert not untested, f"codes no test provokes: {untested}"
