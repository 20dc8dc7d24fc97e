"""``flowledger mcp --sources FILE``: the operator's sources file, reconciled into the
registry before the server serves anything (`flowledger.deploy.registry.reconcile`).

What it did goes to stderr, one line per source and one naming the registered sources
the file leaves alone (stdout may carry the protocol). A file that cannot be used, or a
database that cannot take it, is a one-line `McpStartupError`.
"""

from __future__ import annotations

import sys

from ..deploy.registry.reconcile import SourcesFileError, reconcile_file
from ._session import redact_url
from .errors import McpStartupError

__all__ = ["reconcile_sources_file"]


async def reconcile_sources_file(db_url: str, path: str) -> None:
    try:
        done = await reconcile_file(db_url, path)
    except SourcesFileError as exc:
        raise McpStartupError(f"--sources: {exc}") from None
    except Exception as exc:  # the database: unreachable, damaged registry records, ...
        reason = " ".join(str(exc).split())
        raise McpStartupError(
            f"--sources {path}: cannot reconcile it into {redact_url(db_url)}: "
            f"{type(exc).__name__}: {reason}"
        ) from exc
    for line in done.lines():
        print(line, file=sys.stderr, flush=True)
