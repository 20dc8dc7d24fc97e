"""The deploy test artifacts as an application catalog (``--app tests.deploy.runs.app:catalog``,
run from the repository root), bound to the real MCP servers of `tests.deploy.servers`.

* ``daily_digest`` 1 (``digest.yaml``, with its child ``sign_off`` 1): the time server's
  clock, server-everything's echo and sum in parallel (branches of unequal length), a
  switch, a confirmation interrupt and a child artifact that interrupts.
* ``slow_write`` 1 (``slow_write.yaml``): one call of the test server ``slow_server.py``
  (a tool that is not idempotent, or a read-only one), for the crash tests.
* ``foreach_write`` 1 and ``foreach_child_write`` 1 (with its child ``item_write`` 1):
  foreach nodes calling ``item_server.py``'s ``append_item`` per item (a tool body; a
  child body making two calls per item), and ``foreach_sequence_write`` 1 (a sequence
  body making two calls per item), for the foreach crash tests.
"""

from __future__ import annotations

import os
from pathlib import Path

from flowledger.deploy import StdioSource, ValidatedArtifact, compile_artifact, load_artifact
from flowledger.workflows import Catalog

from ..servers import everything_stdio, time_source

HERE = Path(__file__).parent


def artifact(name: str) -> ValidatedArtifact:
    return load_artifact((HERE / f"{name}.yaml").read_text())


def slow_source() -> StdioSource:
    """The test server of ``slow_server.py`` (files it counts calls in: ``SLOW_DIR``)."""
    import sys

    return StdioSource(
        sys.executable,
        ["-m", "tests.deploy.runs.slow_server"],
        env={"SLOW_DIR": os.environ.get("SLOW_DIR", "")},
        cwd=str(HERE.parents[2]),
    )


def item_source() -> StdioSource:
    """The test server of ``item_server.py`` (the folder it works in: ``ITEM_DIR``)."""
    import sys

    return StdioSource(
        sys.executable,
        ["-m", "tests.deploy.runs.item_server"],
        env={"ITEM_DIR": os.environ.get("ITEM_DIR", "")},
        cwd=str(HERE.parents[2]),
    )


def catalog() -> Catalog:
    definitions = Catalog()
    definitions.register(
        compile_artifact(
            artifact("digest"),
            children={"sign_off": artifact("sign_off")},
            sources={"clock": time_source(), "everything": everything_stdio()},
        )
    )
    definitions.register(compile_artifact(artifact("slow_write"), sources={"slow": slow_source()}))
    definitions.register(
        compile_artifact(artifact("foreach_write"), sources={"items": item_source()})
    )
    definitions.register(
        compile_artifact(
            artifact("foreach_child_write"),
            children={"item_write": artifact("item_write")},
            sources={"items": item_source()},
        )
    )
    definitions.register(
        compile_artifact(artifact("foreach_sequence_write"), sources={"items": item_source()})
    )
    return definitions
