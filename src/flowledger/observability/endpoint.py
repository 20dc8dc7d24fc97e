"""``/metrics`` as an HTTP response, shared by every server that offers it.

Who may ask is the server's own business (its token check runs first); this answers
200 with the process's registry in the Prometheus text format, or 501 naming the
``prometheus`` extra when metrics are off because it is not installed.
"""

from __future__ import annotations

from typing import Final

from starlette.responses import PlainTextResponse, Response

from . import metrics

__all__ = ["METRICS_PATH", "metrics_response"]

METRICS_PATH: Final = "/metrics"


async def metrics_response() -> Response:
    """The scrape's answer (see the module documentation)."""
    if not metrics.enabled():
        try:
            metrics.enable()
        except metrics.MetricsUnavailableError as exc:
            return PlainTextResponse(str(exc), status_code=501)
    body = await metrics.exposition()
    return Response(body, media_type=metrics.CONTENT_TYPE, headers={"cache-control": "no-store"})
