"""What every test shares.

The CLI sizes its tables to ``COLUMNS`` when that is set, and wide when its output is not
a terminal. pytest-xdist's workers start with ``COLUMNS=80`` and ``LINES=24`` in their
environment, so without this the in-process CLI tests' tables would depend on how pytest
was started (truncated ids under ``-n``, whole ones without). Tests that want a width set
it themselves.
"""

from __future__ import annotations

import os

for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
