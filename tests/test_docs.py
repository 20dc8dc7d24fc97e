"""The documentation's references to tests stay true: every ``tests/...py::name`` named
in ``docs/`` or the README is a file with that test in it (docs/reliability.md backs each
guarantee with such a reference)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")
PAGES = sorted([*ROOT.joinpath("docs").glob("*.md"), ROOT / "README.md"])


def references(page: Path) -> list[tuple[str, str | None]]:
    return [(m.group(1), m.group(2)) for m in REFERENCE.finditer(page.read_text())]


def test_the_reliability_page_names_tests() -> None:
    assert len(references(ROOT / "docs" / "reliability.md")) >= 40


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_named_test_exists(page: Path) -> None:
    for path, name in references(page):
        source = ROOT / path
        assert source.is_file(), f"{page.name} names {path}, which does not exist"
        if name is not None:
            assert re.search(rf"^(async )?def {name}\(", source.read_text(), re.M), (
                f"{page.name} names {path}::{name}, which is not defined there"
            )
