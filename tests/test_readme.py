"""The README's Python example runs and prints what the README says it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs_as_shown(tmp_path: Path) -> None:
    """The 30-second example is real: run it and compare with the output block after it."""
    text = README.read_text()
    match = re.search(r"```python\n(.*?)```\s*```\n(.*?)```", text, re.S)
    assert match, "the README has a Python example followed by its output"
    code, expected = match.groups()
    script = tmp_path / "example.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected.strip()
