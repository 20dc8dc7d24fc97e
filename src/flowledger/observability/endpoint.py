"""``/metrics`` as an HTTP response, shared by every server that offers it.

Who may ask is the server's own business (its token check runs first); this answers
200 with the process's registry in the Prometheus text format, or 501 naming the
``prometheus`` extra when metrics are off because it is not installed.
"""

from __future__ import annotations

from typing import Final

from starlette.responses import PlainTextResponse, Response

from . import metrics

__all__ = ["METRICS_PATH", "SHARED_REFUSAL", "metrics_response"]

METRICS_PATH: Final = "/metrics"


SHARED_REFUSAL = (
    "/metrics is not served by a server whose tokens reach several sessions: the counts "
    "span the process, so one tenant would read the others' definition and tool names; "
    "scrape `flowledger worker --metrics-port`, or serve each tenant from its own process"
)


async def metrics_response(*, serves_one_session: bool) -> Response:
    """The scrape's answer (see the module documentation); 403 on a server shared by
    several sessions (`SHARED_REFUSAL`)."""
    if not serves_one_session:
        return PlainTextResponse(SHARED_REFUSAL, status_code=403)
    if not metrics.enabled():
        try:
            metrics.enable()
        except metrics.MetricsUnavailableError as exc:
            return PlainTextResponse(str(exc), status_code=501)
    body = await metrics.exposition()
    return Response(body, media_type=metrics.CONTENT_TYPE, headers={"cache-control": "no-store"})
