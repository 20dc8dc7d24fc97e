"""The dashboard's Starlette application: pages, forms, live streams and assets.

Routes (``--read-only`` serves none of the POST routes that change runs; they answer 405
or 404 like any unknown route):

====================================  ====================================================
``GET  /``                            redirect to ``/runs``
``GET  /runs``                        the runs table (``status``, ``definition``, ``q``
                                      - the start of a run ID - and ``after``, a cursor)
``GET  /runs/bulk``                   confirm a bulk action (``action``: cancel or retry;
                                      ``run``: run IDs); ``POST`` does it, then redirects
                                      to ``/runs/bulk/done``, its report (`bulk`)
``GET  /runs/{id}/time``              a run's durations, attempts and timeline (`time_view`)
``GET  /runs/{id}``                   one run (``after``: a timeline cursor; a deployed
                                      run's trace slice: ``trace_start``, ``trace_limit``)
``GET  /runs/{id}/data``              the run's data at ``revision`` (default: its latest):
                                      state diffed against the previous revision, input,
                                      output, errors, answers (`run_data`)
``GET  /definitions``                 the definitions
``GET  /definitions/{name}/{ver}``    one definition, its graph and its start form
``POST /definitions/{name}/{ver}/start``  start a run from the form (a deployment
                                      revision ``rN``: as ``run_deployment`` starts it)
``GET  /artifacts/{name}/{ver}``      a saved artifact: its schemas and its graph
``GET  /drafts``                      the session's drafts (`drafts`)
``GET  /drafts/{name}``               one draft: its graph as it is, its validity and its
                                      diagnostics with their next actions (read-only)
``GET  /sources``                     the registered sources the session may see
``GET  /sources/{name}``              one of them: its tools, the deployments binding it
                                      and the unfinished runs pinned to it (`sources`)
``POST /runs/{id}/resume``            answer the pending request from the form
``POST /runs/{id}/retry``             retry an errored pause
``POST /runs/{id}/cancel``            cancel (``reason``)
``POST /runs/{id}/revalidate``        a deployed run: revalidate its pinned environment
                                      (connecting to its sources) and show the readiness
``GET  /runs/{id}/fork``              "Fork from here" on a timeline row (``revision``):
                                      what the fork does, its form
``POST /runs/{id}/fork``              a new run after that row's step (``revision``,
                                      ``patch``, ``confirm``); redirects to it
``GET  /.../start``, ``/runs/{id}/resume`` (``retry``, ``cancel``, ``revalidate``):
                                      redirect to the page the action is taken from
``GET  /events``                      SSE: several of the two below in one (``sub``: their
                                      addresses; what a browser's tabs share: `mux`)
``GET  /events/runs``                 SSE: rows of the runs table
``GET  /events/runs/{id}``            SSE: one run's activities and state
``GET  /login``, ``POST /login``,     sign in with a token (only with tokens)
``POST /logout``
``GET  /static/...``                  the CSS and the script, from the package
====================================  ====================================================

Every request passes the HTTP security layer first (`flowledger.httpsec.Guard`: on a
loopback address a loopback ``Host``, else 400; no cross-origin ``Origin``, else 403; a
body of at most 1 MiB, else 413), and every POST's CSRF field is checked before its form
is acted on. Errors are pages with the status they stand for: 400 bad input (the
server's own message, shown above the form), 403 CSRF, 404 no such run, definition,
draft or source (including another session's run and a source the session may not see), 409 a
run that cannot do that now, 429 too many failed tokens from the client (with
``Retry-After``), 500 a damaged source registry record, 503 the session cannot be served.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Scope

from ..deploy import NotADeployedRunError
from ..deploy.artifacts.errors import ArtifactNotFoundError
from ..deploy.deployments.definition import DeployedDefinition, revision_of
from ..deploy.deployments.store import DeploymentNotFoundError
from ..deploy.drafts.errors import DraftCorruptError, DraftNotFoundError
from ..deploy.drafts.service import DraftService
from ..deploy.registry.errors import RegistryCorruptError, SourceNotRegisteredError
from ..deploy.runs.trace import MAX_TRACE_PAGE
from ..httpsec import DEFAULT_MAX_BODY, Guard, Refusal, TooManyFailuresError
from ..observability.endpoint import METRICS_PATH, metrics_response
from ..tools import ToolError
from ..tools.errors import PREFIX
from ..tools.queued import QUEUED
from ..workflows.errors import ConflictError, NotFoundError, UnknownDefinitionError
from ..workflows.records.answers import answering
from ..workflows.records.run import RunStatus, is_id
from ..workflows.schedules import Schedules
from . import bulk
from .counts import QUEUED_LABEL, open_counts
from .drafts import draft_detail, draft_rows
from .fork_view import asks_again, own_progress
from .forms import FormError, form_fields, parse_form
from .graph import MARKS, render_svg
from .live import OpenStreams, Wake
from .loop_progress import loops, vertices_done
from .mux import MAX_PARTS, Part, Refused, Streams
from .queues import queue_rows, rate_rows
from .run_data import NoCheckpointError, revision_data, shown_answers, took
from .security import CSRF_COOKIE, CSRF_FIELD, LOGIN_COOKIE, Gate, new_secret
from .sessions import Served, SessionPool, SessionUnavailableError
from .sources import source_detail, source_rows
from .states import STATES, Latest, vertex_states
from .streams import RowEvents, RunEvents, event_stream
from .time_view import time_view
from .timing import duration_of, duration_text, run_seconds
from .views import (
    PAUSE_FILTERS,
    RUNS_PAGE,
    TIMELINE_PAGE,
    Cursor,
    GraphCache,
    RunFilter,
    get_run,
    inherited_vertices,
    latest_vertices,
    parse_cursor,
    pause_kind,
    pretty_json,
    progress,
    recent_history,
)

__all__ = ["Dashboard"]

log = logging.getLogger("flowledger.web")

_HERE: Final = Path(__file__).parent
_MAX_FORM_BYTES: Final = DEFAULT_MAX_BODY  # the body limit; a form part may fill it
_RESUME_DEADLINE: Final = 60.0  # only a guard against a hang: resume returns long before
DEPLOYMENT_PAGE: Final = 500  # deployment_list's largest page

_TERMINAL: Final = frozenset({"completed", "cancelled", "failed"})
TRACE_PAGE: Final = 20
_FORKS_KEPT: Final = 1024  # forks whose inherited vertices are kept (then all forgotten)
_SECURITY_HEADERS: Final = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


class _Refusal(Exception):
    """A request answered with an error page (or a redirect) instead of its result."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        redirect: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.redirect = redirect
        self.headers = dict(headers or {})

    @classmethod
    def throttled(cls, exc: TooManyFailuresError) -> _Refusal:
        return cls(429, str(exc), headers=exc.headers)


def _said(error: ToolError) -> str:
    """A tool's error as a page shows it (without the prefix that tells a model whose
    error it is)."""
    return error.message.removeprefix(PREFIX)


def _damaged_registry(exc: RegistryCorruptError) -> _Refusal:
    """A damaged registry record: its key names a source, maybe one this session may not
    see, so the page says only that; the log says which."""
    log.error("%s", exc)
    return _Refusal(500, "the source registry cannot be read; the server's log says why")


def _damaged_draft(exc: DraftCorruptError) -> _Refusal:
    """A damaged draft record: the log says which key."""
    log.error("%s", exc)
    return _Refusal(500, "a draft of this session cannot be read; the server's log says why")


_PAUSE_WORDS: Final = {"interrupted:request": "awaiting input", "interrupted:error": "error"}


def _status_choices() -> list[tuple[str, str]]:
    """The runs list's status filter: (value, label), each run status, after ``pending``
    its queued runs, and after ``interrupted`` its two pause kinds (`views.PAUSE_FILTERS`)."""
    out: list[tuple[str, str]] = []
    for status in RunStatus:
        out.append((str(status), str(status)))
        if status is RunStatus.PENDING:
            out.append((QUEUED, QUEUED_LABEL))
        if status is RunStatus.INTERRUPTED:
            out += [(value, f"interrupted: {_PAUSE_WORDS[value]}") for value in PAUSE_FILTERS]
    return out


_ENUM_WORDS: Final = {"not_applicable": "not applicable: only a paused run resumes"}


def _words(value: object) -> str:
    """What a person reads for a raw value a tool returns: an enum name in words
    (``not_applicable``), a flag as yes / no / not declared (not Python's True / None)."""
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if value is None:
        return "not declared"
    return _ENUM_WORDS.get(str(value), str(value))


def _short_time(value: object) -> str:
    """A stored time (UTC, ISO 8601) to the second, saying its zone."""
    text = str(value or "")
    return text.replace("T", " ").removesuffix("Z")[:19] + " UTC" if text else ""


def _patch(text: str) -> dict[str, Any]:
    """The fork form's state changes: a JSON object (`FormError` naming the field)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormError("patch", f"not valid JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(value, dict):
        raise FormError("patch", 'must be a JSON object of state fields, like {"title": "x"}')
    return value


_ACTIONS: Final = ("/start", "/resume", "/retry", "/cancel", "/revalidate")


def _address_after_post(request: Request, context: Mapping[str, Any]) -> str:
    """The GET address of a page answered to a POST (an error shown with its form, or
    a revalidation), which the page script puts in the address bar, so a reload reads
    the page instead of posting again; "" when the address already is one."""
    if request.method != "POST":
        return ""
    path = request.url.path
    for action in _ACTIONS:
        if path.endswith(action):
            return path.removesuffix(action)
    if path.endswith("/fork") and isinstance(context.get("plan"), Mapping):
        return f"{path}?{urlencode({'revision': context['plan']['requested_revision']})}"
    return ""


def _trace_slice(request: Request) -> tuple[int, int]:
    """``trace_start`` and ``trace_limit``, bounded as ``read_run_trace`` bounds them."""
    start_text = request.query_params.get("trace_start", "0")
    limit_text = request.query_params.get("trace_limit", str(TRACE_PAGE))
    if not start_text.isdigit() or len(start_text) > 9:
        raise _Refusal(400, "trace_start must be a whole number from 0")
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_TRACE_PAGE:
        raise _Refusal(400, f"trace_limit must be a whole number in 1..{MAX_TRACE_PAGE}")
    return int(start_text), int(limit_text)


@dataclass(frozen=True)
class _Ctx:
    """One request's served session and its CSRF value."""

    served: Served
    csrf: str
    fresh_csrf: bool


class Dashboard:
    """The ASGI application of ``flowledger web``."""

    def __init__(
        self, pool: SessionPool, gate: Gate, *, read_only: bool, secure_cookies: bool = False
    ) -> None:
        """``secure_cookies`` marks every cookie ``Secure`` (requests over HTTPS get it
        anyway)."""
        self.pool = pool
        self.gate = gate
        self.read_only = read_only
        self.secure_cookies = secure_cookies
        self.graphs = GraphCache()
        self.streams = OpenStreams()  # the live streams open now
        self._forks: dict[tuple[str, str], frozenset[str]] = {}  # `_inherited`
        self._background: set[asyncio.Task[Any]] = set()
        self._env = Environment(
            loader=FileSystemLoader(str(_HERE / "templates")),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._env.filters["short_time"] = _short_time
        self._env.filters["words"] = _words
        self._env.filters["pretty_json"] = pretty_json
        self._env.filters["took"] = took
        self._env.filters["duration"] = duration_text
        self._env.globals.update(
            read_only=read_only, uses_tokens=gate.uses_tokens, duration_of=duration_of
        )

    # -- the application ---------------------------------------------------------------------

    def asgi_app(self) -> ASGIApp:
        """The routes below, behind the HTTP security layer (`flowledger.httpsec.Guard`)."""
        return Guard(
            self._routes(),
            loopback=self.gate.loopback,
            respond=self._guard_refused,
            max_body=_MAX_FORM_BYTES,
        )

    def _guard_refused(self, scope: Scope, refusal: Refusal) -> Response:
        if refusal.check == "host":  # the dashboard's status for it, since it began
            return self._refused(
                Request(scope), _Refusal(400, "this dashboard answers only to a loopback host name")
            )
        return self._refused(Request(scope), _Refusal(refusal.status, refusal.message))

    def _routes(self) -> Starlette:
        routes: list[BaseRoute] = (
            []
            if self.read_only
            else [  # before /runs/{run_id}
                Route("/runs/bulk", self._bulk_page, methods=["GET"]),
                Route("/runs/bulk", self._bulk, methods=["POST"]),
                Route("/runs/bulk/done", self._bulk_done, methods=["GET"]),
            ]
        )
        routes += [
            Route("/", self._home),
            Route("/runs", self._runs),
            Route("/runs/{run_id}", self._run),
            Route("/runs/{run_id}/data", self._run_data),
            Route("/runs/{run_id}/time", self._time),
            Route("/definitions", self._definitions),
            Route("/definitions/{name}/{version}", self._definition),
            Route("/artifacts/{name}/{version}", self._artifact),
            Route("/drafts", self._drafts),
            Route("/drafts/{name}", self._draft),
            Route("/sources", self._sources),
            Route("/schedules", self._schedules),
            Route("/sources/{name}", self._source),
            Route("/events", self._events),
            Route("/events/runs", self._runs_events),
            Route("/events/runs/{run_id}", self._run_events),
            Route("/login", self._login_page, methods=["GET"]),
            Route("/login", self._login, methods=["POST"]),
            Route("/logout", self._logout, methods=["POST"]),
            Route(METRICS_PATH, self._metrics, methods=["GET"]),
            Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
        ]
        routes += [  # a new tab or a bookmark of an action's address: its page
            Route("/definitions/{name}/{version}/start", self._to_page, methods=["GET"]),
            *(
                Route("/runs/{run_id}/" + action, self._to_page, methods=["GET"])
                for action in ("resume", "retry", "cancel", "revalidate")
            ),
        ]
        if not self.read_only:
            routes += [
                Route("/definitions/{name}/{version}/start", self._start, methods=["POST"]),
                Route("/runs/{run_id}/resume", self._resume, methods=["POST"]),
                Route("/runs/{run_id}/retry", self._retry, methods=["POST"]),
                Route("/runs/{run_id}/cancel", self._cancel, methods=["POST"]),
                Route("/runs/{run_id}/revalidate", self._revalidate, methods=["POST"]),
                Route("/runs/{run_id}/fork", self._fork_page, methods=["GET"]),
                Route("/runs/{run_id}/fork", self._fork, methods=["POST"]),
            ]
        return Starlette(routes=routes)

    # -- shared steps ------------------------------------------------------------------------

    async def _context(self, request: Request, *, page: bool = True) -> _Ctx:
        session_id: str | None = None
        if self.gate.uses_tokens:
            try:
                session_id = self.gate.session_of(request)
            except TooManyFailuresError as exc:
                raise _Refusal.throttled(exc) from None
            if session_id is None:
                if page and request.method == "GET":
                    raise _Refusal(303, "sign in", redirect="/login")
                raise _Refusal(401, "sign in with a token first")
        try:
            served = await self.pool.get(session_id)
        except SessionUnavailableError:
            raise _Refusal(503, "the workflow session is unavailable; try again later") from None
        cookie = request.cookies.get(CSRF_COOKIE, "")
        return _Ctx(served, cookie or new_secret(), not cookie)

    async def _form(self, request: Request) -> dict[str, str]:
        """The POST's form fields, once the CSRF field is checked (host, origin and size
        were checked by the guard)."""
        form = await request.form(max_files=0, max_fields=200, max_part_size=_MAX_FORM_BYTES)
        fields = {key: value for key, value in form.items() if isinstance(value, str)}
        if not Gate.csrf_matches(request, fields.get(CSRF_FIELD)):
            raise _Refusal(403, "the form's CSRF token is missing or wrong; reload the page")
        return fields

    def _page(
        self,
        request: Request,
        template: str,
        context: Mapping[str, Any],
        *,
        ctx: _Ctx | None = None,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        csrf = ctx.csrf if ctx is not None else request.cookies.get(CSRF_COOKIE) or new_secret()
        body = self._env.get_template(template).render(
            {
                **context,
                "csrf": csrf,
                "csrf_field": CSRF_FIELD,
                "path": request.url.path,
                "address": _address_after_post(request, context),
            }
        )
        response = HTMLResponse(
            body, status_code=status, headers={**_SECURITY_HEADERS, **(headers or {})}
        )
        if request.cookies.get(CSRF_COOKIE) != csrf:
            self._set_cookie(request, response, CSRF_COOKIE, csrf)
        return response

    def _set_cookie(self, request: Request, response: Response, name: str, value: str) -> None:
        secure = self.secure_cookies or request.url.scheme == "https"
        response.set_cookie(name, value, httponly=True, samesite="strict", secure=secure, path="/")

    def _refused(self, request: Request, refusal: _Refusal) -> Response:
        if refusal.redirect:
            return RedirectResponse(refusal.redirect, status_code=303)
        if request.url.path.startswith("/events/") or request.url.path == METRICS_PATH:
            return Response(
                str(refusal),
                status_code=refusal.status,
                media_type="text/plain",
                headers=refusal.headers,
            )
        return self._page(
            request,
            "error.html",
            {"status": refusal.status, "message": str(refusal)},
            status=refusal.status,
            headers=refusal.headers,
        )

    @staticmethod
    def _tool_refusal(error: ToolError) -> _Refusal:
        message = _said(error)
        if isinstance(error.cause, NotFoundError):
            return _Refusal(404, message)
        if isinstance(error.cause, ConflictError):
            return _Refusal(409, message)
        return _Refusal(400, message)

    @staticmethod
    def _run_id(request: Request) -> str:
        run_id = str(request.path_params["run_id"])
        if not is_id(run_id):
            raise _Refusal(404, f"no run {run_id!r}: a run ID is a UUID")
        return run_id

    # -- pages -------------------------------------------------------------------------------

    async def _to_page(self, request: Request) -> Response:
        """``GET`` of a POST action's address: the page the action is taken from."""
        return RedirectResponse(request.url.path.rsplit("/", 1)[0], status_code=303)

    async def _home(self, request: Request) -> Response:
        return RedirectResponse("/runs", status_code=303)

    async def _runs(self, request: Request) -> Response:
        try:
            ctx = await self._context(request)
            chosen = RunFilter(
                request.query_params.get("status", ""),
                request.query_params.get("definition", ""),
                request.query_params.get("q", "").strip(),
            )
            after = request.query_params.get("after", "")
            tools = ctx.served.tools
            # Taken before the read: whatever changes after it reaches the table live.
            mark = ctx.served.session.clock.now().isoformat()  # what updated_at is read by
            page = await tools.call(
                "workflow_run_list", {**chosen.arguments(), "limit": RUNS_PAGE, "after": after}
            )
            rows = [await self._row(ctx, run) for run in page["runs"]]
            rows = [row for row in rows if chosen.matches_pause(row)]
            counts = await open_counts(ctx.served)
        except ToolError as exc:
            return self._refused(request, self._tool_refusal(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        names = sorted(
            {item.name for item in ctx.served.session.catalog.list()}
            | ({chosen.definition} if chosen.definition else set())
        )
        later = page.get("next", "")
        stream_query = urlencode({**chosen.query(), "since": mark})
        return self._page(
            request,
            "runs.html",
            {
                "rows": rows,
                "filter": chosen,
                "statuses": _status_choices(),
                "counts": counts,
                "definitions": names,
                "newest": "/runs?" + urlencode(chosen.query()) if after else "",
                "next": "/runs?" + urlencode({**chosen.query(), "after": later}) if later else "",
                "stream": f"/events/runs?{stream_query}",
                "first_page": not after,
            },
            ctx=ctx,
        )

    async def _row(self, ctx: _Ctx, run: dict[str, Any]) -> dict[str, Any]:
        tools = ctx.served.tools
        done = own_progress(await progress(tools, run), await self._inherited(ctx, run))
        seconds, finished = run_seconds(run, ctx.served.session.clock.now())
        picture = self.graphs.picture(
            ctx.served.session.catalog, str(run["definition_name"]), str(run["definition_version"])
        )
        looping = picture is not None and loops(picture.shape)
        return {
            **run,
            "progress": None if looping else done,
            "loops": looping,
            "pause_kind": await pause_kind(tools, run),
            "seconds": seconds,
            "finished": finished,
        }

    def _row_html(self, row: Mapping[str, Any]) -> str:
        return self._env.get_template("_row.html").render(row=row)

    async def _run(self, request: Request) -> Response:
        try:
            ctx = await self._context(request)
            run_id = self._run_id(request)
            cursor = parse_cursor(request.query_params.get("after"))
            if cursor is None:
                raise _Refusal(400, "after must be a timeline cursor (<revision>:<event id>)")
            trace = _trace_slice(request)
            view = await self._run_view(ctx, run_id, cursor, trace=trace)
            return self._page(request, "run.html", view, ctx=ctx)
        except ToolError as exc:
            return self._refused(request, self._tool_refusal(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)

    async def _run_data(self, request: Request) -> Response:
        """The run's data at a revision, for its session only (`run_data`)."""
        try:
            ctx = await self._context(request)
            run_id = self._run_id(request)
            text = request.query_params.get("revision", "")
            revision = self._revision(text) if text else None
            run = await get_run(ctx.served.tools, run_id)
            name, version = str(run["definition_name"]), str(run["definition_version"])
            picture = self.graphs.picture(ctx.served.session.catalog, name, version)
            data = await revision_data(
                ctx.served.session,
                run_id,
                revision,
                labels=dict(picture.shape.vertices) if picture is not None else {},
                deployed=self._deployed(ctx, name, version),
            )
        except NoCheckpointError as exc:
            return self._refused(request, _Refusal(404, str(exc)))
        except ToolError as exc:
            return self._refused(request, self._tool_refusal(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        return self._page(request, "run_data.html", {"data": data}, ctx=ctx)

    async def _time(self, request: Request) -> Response:
        try:
            ctx = await self._context(request)
            view = await time_view(ctx.served, self.graphs, self._run_id(request))
        except ToolError as exc:
            return self._refused(request, self._tool_refusal(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        return self._page(request, "time.html", view, ctx=ctx)

    async def _run_view(
        self,
        ctx: _Ctx,
        run_id: str,
        cursor: Cursor,
        *,
        error: str = "",
        values: Mapping[str, str] | None = None,
        trace: tuple[int, int] = (0, TRACE_PAGE),
        revalidate: bool = False,
    ) -> dict[str, Any]:
        tools = ctx.served.tools
        run = await get_run(tools, run_id)
        deployed = await self._deployed_view(ctx, run, trace, revalidate=revalidate)
        if deployed is not None:
            run["resume_readiness"] = deployed["readiness"]
        entries = await recent_history(tools, run)
        page = await tools.call(
            "workflow_run_history",
            {"run_id": run_id, "limit": TIMELINE_PAGE, **cursor.arguments()},
        )
        later = ""
        if "next_revision" in page and page["entries"]:
            later = "?" + urlencode({"after": Cursor.after(page["entries"][-1]).text()})
        end = Cursor.after(entries[-1]).text() if entries else ""
        latest = await latest_vertices(ctx.served.session, run_id)
        answers, recorded = await shown_answers(ctx.served.session, run_id)
        return {
            "answers": answers,
            "answers_recorded": recorded,
            **self._run_parts(
                ctx,
                run,
                entries,
                latest,
                inherited=await self._inherited(ctx, run),
                error=error,
                values=values,
            ),
            "timeline": page["entries"],
            "timeline_first": cursor == Cursor(),
            "timeline_later": later,
            "at_end": not later,
            "stream": f"/events/runs/{run_id}?" + urlencode({"after": end}),
            "deployed": deployed,
        }

    async def _deployed_view(
        self, ctx: _Ctx, run: Mapping[str, Any], trace: tuple[int, int], *, revalidate: bool
    ) -> dict[str, Any] | None:
        """A deployed run's panels (None for any other run): its pin, its readiness
        (revalidated against its sources only when asked: that connects to them) and one
        slice of its trace. Everything is read through the session's deploy tools, so
        another session's run is not found and no secret value is ever in a result."""
        if revision_of(str(run["definition_version"])) is None:
            return None
        run_id = str(run["run_id"])
        deploy = ctx.served.deploy
        try:
            inspected = await deploy.call(
                "inspect_run", {"run_id": run_id, "revalidate": revalidate}
            )
        except ToolError as exc:
            if isinstance(exc.cause, NotADeployedRunError | DeploymentNotFoundError):
                return None  # an app's definition whose version merely looks like one
            raise
        start, limit = trace
        page = await deploy.call(
            "read_run_trace", {"run_id": run_id, "start": start, "limit": limit}
        )
        pin = await deploy.service.pin_of(run_id)
        total = int(page["total"])
        base = f"/runs/{run_id}?"
        earlier = later = ""
        if start > 0:
            earlier = base + urlencode({"trace_start": max(0, start - limit), "trace_limit": limit})
        if start + limit < total:
            later = base + urlencode({"trace_start": start + limit, "trace_limit": limit})
        picture = self.graphs.picture(
            ctx.served.session.catalog, str(run["definition_name"]), str(run["definition_version"])
        )
        return {
            "labels": dict(picture.shape.vertices) if picture is not None else {},
            "inspected": inspected,
            "readiness": inspected["resume_readiness"],
            "pin": None if pin is None else pin.to_json(),
            "trace": page["entries"],
            "trace_start": start,
            "trace_total": total,
            "trace_earlier": earlier + "#trace" if earlier else "",
            "trace_later": later + "#trace" if later else "",
        }

    async def _inherited(self, ctx: _Ctx, run: Mapping[str, Any]) -> frozenset[str]:
        """A fork's inherited finished vertices (`views.inherited_vertices`), read once per
        fork: its origins' histories up to the fork point never change."""
        if not run.get("forked_from"):
            return frozenset()
        key = (ctx.served.session_id, str(run["run_id"]))
        if key not in self._forks:
            if len(self._forks) >= _FORKS_KEPT:
                self._forks.clear()
            self._forks[key] = await inherited_vertices(ctx.served.tools, run)
        return self._forks[key]

    def _run_parts(
        self,
        ctx: _Ctx,
        run: Mapping[str, Any],
        entries: list[dict[str, Any]],
        latest: Latest | None,
        *,
        inherited: frozenset[str] = frozenset(),
        error: str = "",
        values: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        picture = self.graphs.picture(
            ctx.served.session.catalog, str(run["definition_name"]), str(run["definition_version"])
        )
        states: dict[str, str] = {}
        svg = None
        if picture is not None:
            states = vertex_states(picture.shape, run, entries, latest, inherited)
            svg = render_svg(picture, states, title=f"graph of {run['definition_name']}")
        pending = run.get("pending")
        fields = []
        if isinstance(pending, Mapping) and pending.get("kind") == "request":
            fields = form_fields(pending.get("resume_schema"))
        last = entries[-1] if entries else None
        done = None
        for entry in reversed(entries):
            if entry.get("total_vertices"):
                done = (int(entry.get("completed_vertices", 0)), int(entry["total_vertices"]))
                break
        done = own_progress(done, inherited)
        looping = picture is not None and loops(picture.shape)
        if picture is not None and looping:
            done = vertices_done(picture.shape, states, inherited)
        pause_key = str(run["run_status"])
        if isinstance(pending, Mapping):
            pause_key += f":{pending.get('kind')}:{pending.get('checkpoint_revision')}"
        return {
            "run": run,
            "pause_key": pause_key,
            "svg": svg,
            "states": states,
            "state_names": STATES,
            "marks": MARKS,
            "pending": pending if isinstance(pending, Mapping) else None,
            "fields": fields,
            "values": values or {},
            "error": error,
            "last": last,
            "done": done,
            "loops": looping,  # the timeline's completion counts are then not shown
            "inherited_count": len(inherited),
            "terminal": run["run_status"] in _TERMINAL,
            "csrf": ctx.csrf,
            "csrf_field": CSRF_FIELD,
        }

    async def _definitions(self, request: Request) -> Response:
        try:
            ctx = await self._context(request)
            listing = await ctx.served.tools.call("workflow_definition_list", {})
            deployments: list[Any] = []
            cursor: str | None = None
            while True:  # every deployment of the session, a page at a time
                page = await ctx.served.deploy.call(
                    "deployment_list",
                    {"limit": DEPLOYMENT_PAGE, **({"cursor": cursor} if cursor else {})},
                )
                deployments.extend(page["deployments"])
                cursor = page.get("next")
                if not cursor:
                    break
            service = ctx.served.deploy.service
            artifacts = await service.artifacts.list(ctx.served.session_id)
        except ToolError as exc:
            return self._refused(request, self._tool_refusal(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        return self._page(
            request,
            "definitions.html",
            {
                "definitions": listing["definitions"],
                "truncated": listing["truncated"],
                "deployments": deployments,
                "artifacts": artifacts,
            },
            ctx=ctx,
        )

    async def _definition_view(self, ctx: _Ctx, name: str, version: str) -> dict[str, Any]:
        session = ctx.served.session
        loader = session.supervisor.definition_loader
        if loader is not None and (name, version) not in session.catalog:
            await loader(name, version)  # a deployment revision saved since the session opened
        listing = await ctx.served.tools.call("workflow_definition_list", {})
        for item in listing["definitions"]:
            if item["name"] == name and item["version"] == version:
                picture = self.graphs.picture(ctx.served.session.catalog, name, version)
                svg = None if picture is None else render_svg(picture, {}, title=f"graph of {name}")
                return {
                    "definition": item,
                    "svg": svg,
                    "fields": form_fields(item["input_schema"]),
                    "values": {},
                    "error": "",
                }
        raise _Refusal(404, f"no definition {name!r} version {version!r}")

    async def _definition(self, request: Request) -> Response:
        try:
            ctx = await self._context(request)
            view = await self._definition_view(
                ctx, str(request.path_params["name"]), str(request.path_params["version"])
            )
        except ToolError as exc:
            return self._refused(request, self._tool_refusal(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        return self._page(request, "definition.html", view, ctx=ctx)

    async def _artifact(self, request: Request) -> Response:
        """A saved artifact version: what it declares and its graph (an artifact runs
        through a deployment, so there is no start form here)."""
        name, version = str(request.path_params["name"]), str(request.path_params["version"])
        try:
            ctx = await self._context(request)
            shown = await ctx.served.deploy.call(
                "artifact_show", {"name": name, "version": version}
            )
        except ToolError as exc:
            if isinstance(exc.cause, ArtifactNotFoundError):
                return self._refused(request, _Refusal(404, _said(exc)))
            return self._refused(request, self._tool_refusal(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        document = shown["document"]
        resume = {
            node_id: node["resume_schema"]
            for node_id, node in document.get("nodes", {}).items()
            if node.get("kind") == "interrupt" and "resume_schema" in node
        }
        picture = await self.graphs.artifact_picture(
            ctx.served.deploy.service, str(shown["closure_digest"]), name, version
        )
        view = {
            "artifact": shown,
            "document": document,
            "resume_schemas": resume,
            "svg": None if picture is None else render_svg(picture, {}, title=f"graph of {name}"),
        }
        return self._page(request, "artifact.html", view, ctx=ctx)

    async def _drafts(self, request: Request) -> Response:
        try:
            ctx = await self._context(request)
            rows = await draft_rows(DraftService(ctx.served.deploy.service))
        except DraftCorruptError as exc:
            return self._refused(request, _damaged_draft(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        return self._page(request, "drafts.html", {"drafts": rows}, ctx=ctx)

    async def _draft(self, request: Request) -> Response:
        """One draft of the session; another session's draft is 404 like an unknown one."""
        try:
            ctx = await self._context(request)
            detail = await draft_detail(
                DraftService(ctx.served.deploy.service), str(request.path_params["name"])
            )
        except DraftNotFoundError as exc:
            return self._refused(request, _Refusal(404, str(exc)))
        except DraftCorruptError as exc:
            return self._refused(request, _damaged_draft(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        svg = None
        if detail.picture is not None:
            states = {vertex: "failed" for vertex in detail.failed}
            svg = render_svg(detail.picture, states, title=f"graph of draft {detail.row.name}")
        return self._page(request, "draft.html", {"draft": detail, "svg": svg}, ctx=ctx)

    async def _schedules(self, request: Request) -> Response:
        """The session's schedules with their next fire times (read-only: schedules are
        changed with the CLI or the MCP tools)."""
        try:
            ctx = await self._context(request)
        except _Refusal as refusal:
            return self._refused(request, refusal)
        schedules = Schedules(ctx.served.session)
        rows = [await schedules.describe(item) for item in await schedules.list()]
        limits = {"queues": await queue_rows(ctx.served), "rates": await rate_rows(ctx.served)}
        return self._page(request, "schedules.html", {"schedules": rows, **limits}, ctx=ctx)

    async def _sources(self, request: Request) -> Response:
        try:
            ctx = await self._context(request)
            rows = await source_rows(ctx.served.deploy.service)
        except RegistryCorruptError as exc:
            return self._refused(request, _damaged_registry(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        return self._page(request, "sources.html", {"sources": rows}, ctx=ctx)

    async def _source(self, request: Request) -> Response:
        """One registered source; one the session may not see is 404 like an unknown name."""
        try:
            ctx = await self._context(request)
            detail = await source_detail(
                ctx.served.deploy.service, str(request.path_params["name"])
            )
        except SourceNotRegisteredError as exc:
            return self._refused(request, _Refusal(404, str(exc)))
        except RegistryCorruptError as exc:
            return self._refused(request, _damaged_registry(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        return self._page(request, "source.html", {"source": detail}, ctx=ctx)

    # -- changing runs -----------------------------------------------------------------------

    async def _start(self, request: Request) -> Response:
        name = str(request.path_params["name"])
        version = str(request.path_params["version"])
        try:
            ctx = await self._context(request, page=False)
            fields = await self._form(request)
            view = await self._definition_view(ctx, name, version)
        except ToolError as exc:
            return self._refused(request, self._tool_refusal(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        try:
            value = parse_form(view["definition"]["input_schema"], fields)
            if self._deployed(ctx, name, version):
                result = await self._run_deployment(ctx, name, version, value)
            else:
                result = await ctx.served.tools.call(
                    "workflow_run_start",
                    {"definition_name": name, "definition_version": version, "input": value},
                )
        except (FormError, ToolError) as exc:
            message = _said(exc) if isinstance(exc, ToolError) else str(exc)
            view.update(error=message, values=fields)
            return self._page(request, "definition.html", view, ctx=ctx, status=400)
        return RedirectResponse(f"/runs/{result['run_id']}", status_code=303)

    @staticmethod
    def _deployed(ctx: _Ctx, name: str, version: str) -> bool:
        try:
            definition = ctx.served.session.catalog.resolve(name, version)
        except UnknownDefinitionError:
            return False
        return isinstance(definition, DeployedDefinition)

    @staticmethod
    async def _run_deployment(
        ctx: _Ctx, name: str, version: str, value: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A deployment revision is started as ``run_deployment`` starts it (environment
        validated, then pinned): a plain start would leave the run without its pin."""
        arguments = {
            "deployment": name,
            "revision": revision_of(version),
            "input": dict(value),
            "wait_seconds": 0,
        }
        result = await ctx.served.deploy.call("run_deployment", arguments)
        if result["status"] == "unrunnable":
            problems = "; ".join(
                f"{item['code']}: {item['message']}" for item in result["diagnostics"]
            )
            raise ToolError(f"the deployment cannot run: {problems}")
        return result

    async def _resume(self, request: Request) -> Response:
        return await self._continue(request, answer=True)

    async def _retry(self, request: Request) -> Response:
        return await self._continue(request, answer=False)

    async def _continue(self, request: Request, *, answer: bool) -> Response:
        """Resume with the form's answer, or retry an errored pause. The tool returns
        when the run pauses again or ends, which may be long: the page is answered as soon
        as the run has resumed (its ``run_resumed`` activity) or the call has failed."""
        try:
            ctx = await self._context(request, page=False)
            run_id = self._run_id(request)
            fields = await self._form(request)
            tools = ctx.served.tools
            run = await get_run(tools, run_id)
        except ToolError as exc:
            return self._refused(request, self._tool_refusal(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        pending = run.get("pending")
        arguments: dict[str, Any] = {"run_id": run_id}
        try:
            if not isinstance(pending, Mapping):
                raise _Refusal(409, f"run {run_id} is {run['run_status']}; nothing to resume")
            if pending.get("kind") == "timer":
                raise _Refusal(
                    409, f"this run is parked until {pending.get('wake_at')}: it resumes by itself"
                )
            if answer:
                if pending.get("kind") != "request":
                    raise _Refusal(409, "this pause is an error: retry it instead")
                arguments["resume"] = parse_form(pending.get("resume_schema"), fields)
            elif pending.get("kind") != "error":
                raise _Refusal(409, "this pause waits for an answer: resume it with the form")
            await self._resume_call(ctx.served, run_id, arguments)
        except _Refusal as refusal:
            if refusal.status != 400:
                return self._refused(request, refusal)
            return await self._run_again(request, ctx, run_id, str(refusal), fields)
        except FormError as exc:
            return await self._run_again(request, ctx, run_id, str(exc), fields)
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    async def _run_again(
        self, request: Request, ctx: _Ctx, run_id: str, error: str, fields: Mapping[str, str]
    ) -> Response:
        view = await self._run_view(ctx, run_id, Cursor(), error=error, values=fields)
        return self._page(request, "run.html", view, ctx=ctx, status=400)

    async def _resume_call(self, served: Served, run_id: str, arguments: dict[str, Any]) -> None:
        wake = Wake(
            served.session.journal,
            served.session_id,
            lambda record: record.run_id == run_id,
        )
        with answering("web"):  # the task keeps it: the answer says the dashboard sent it
            call = asyncio.create_task(served.tools.call("workflow_run_resume", arguments))
        self._background.add(call)
        call.add_done_callback(self._finished)
        try:
            watcher = asyncio.create_task(wake.wait(_RESUME_DEADLINE))
            await asyncio.wait({call, watcher}, return_when=asyncio.FIRST_COMPLETED)
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        finally:
            await wake.close()
        if call.done():
            exc = call.exception()
            if isinstance(exc, ToolError):
                raise self._tool_refusal(exc)
            if exc is not None:
                raise exc

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.info("resume ended with: %s", task.exception())

    async def _cancel(self, request: Request) -> Response:
        try:
            ctx = await self._context(request, page=False)
            run_id = self._run_id(request)
            fields = await self._form(request)
            arguments = {"run_id": run_id, "reason": fields.get("reason", "")}
            await ctx.served.tools.call("workflow_run_cancel", arguments)
        except ToolError as exc:
            refusal = self._tool_refusal(exc)
            if refusal.status == 400:
                return await self._run_again(request, ctx, run_id, refusal.args[0], fields)
            return self._refused(request, refusal)
        except _Refusal as refusal:
            return self._refused(request, refusal)
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    async def _bulk_page(self, request: Request) -> Response:
        """The confirmation of a bulk action on the runs ticked in the list (`bulk`)."""
        try:
            ctx = await self._context(request)
            try:
                action = bulk.action_of(request.query_params.get("action", ""))
                run_ids = bulk.chosen_runs(request.query_params.getlist("run"))
            except FormError as exc:
                raise _Refusal(400, str(exc)) from None
            planned = await bulk.plan(ctx.served.tools, action, run_ids)
        except ToolError as exc:
            return self._refused(request, self._tool_refusal(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        context = {"action": action, "verb": bulk.ACTIONS[action], "planned": planned}
        return self._page(request, "bulk.html", context, ctx=ctx)

    async def _bulk(self, request: Request) -> Response:
        """Do the confirmed bulk action on each run still as the confirmation showed it;
        then the report (redirect after POST: a reload does not act again)."""
        try:
            ctx = await self._context(request, page=False)
            await self._form(request)  # the CSRF check
            form = await request.form()
            try:
                action = bulk.action_of(str(form.get("action", "")))
                seen = [bulk.Seen.parse(str(value)) for value in form.getlist("seen")]
                bulk.chosen_runs([item.run_id for item in seen])
            except FormError as exc:
                raise _Refusal(400, str(exc)) from None

            async def retry(run_id: str) -> None:
                await self._resume_call(ctx.served, run_id, {"run_id": run_id})

            outcomes = await bulk.apply(
                ctx.served.tools, action, seen, reason=str(form.get("reason", "")), resume=retry
            )
        except ToolError as exc:
            return self._refused(request, self._tool_refusal(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        query = urlencode(
            [("action", action), *(("r", f"{run_id}:{outcome}") for run_id, outcome in outcomes)]
        )
        return RedirectResponse(f"/runs/bulk/done?{query}", status_code=303)

    async def _bulk_done(self, request: Request) -> Response:
        """A bulk action's report: each run's outcome and its status now (read again)."""
        try:
            ctx = await self._context(request)
            outcomes = bulk.parse_outcomes(request.query_params.getlist("r"))
            rows = []
            for run_id, outcome in outcomes:
                try:
                    now: dict[str, Any] | None = await get_run(ctx.served.tools, run_id)
                except ToolError:
                    now = None
                rows.append((run_id, bulk.OUTCOME_WORDS[outcome], outcome, now))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        action = request.query_params.get("action", "")
        context = {"verb": bulk.ACTIONS.get(action, "Act on"), "rows": rows}
        return self._page(request, "bulk_done.html", context, ctx=ctx)

    async def _fork_page(self, request: Request) -> Response:
        """ "Fork from here": what a fork after that timeline row's revision does (the
        tool's preview, `flowledger.tools.fork`), a state patch field and, when steps
        that already ran would run again, a confirmation."""
        try:
            ctx = await self._context(request)
            run_id = self._run_id(request)
            revision = self._revision(request.query_params.get("revision", ""))
            view = await self._fork_view(ctx, run_id, revision)
        except ToolError as exc:
            return self._refused(request, self._tool_refusal(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        return self._page(request, "fork.html", view, ctx=ctx)

    @staticmethod
    def _revision(text: str) -> int:
        if not text.isdigit() or len(text) > 19:
            raise _Refusal(400, "revision must be a checkpoint revision (an integer >= 0)")
        return int(text)

    async def _fork_view(
        self,
        ctx: _Ctx,
        run_id: str,
        revision: int,
        *,
        error: str = "",
        values: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        fork = ctx.served.fork
        if fork is None:
            raise _Refusal(405, "this dashboard is read-only")
        run = await get_run(ctx.served.tools, run_id)
        plan = await fork.call(
            "workflow_run_fork",
            {"run_id": run_id, "revision": revision, "after": True, "preview": True},
        )
        picture = self.graphs.picture(
            ctx.served.session.catalog, str(run["definition_name"]), str(run["definition_version"])
        )
        labels = dict(picture.shape.vertices) if picture is not None else {}
        return {
            "run": run,
            "plan": plan,
            "asks": await asks_again(ctx.served, run, plan["again"]),
            "labels": labels,
            "error": error,
            "values": values or {},
        }

    async def _fork(self, request: Request) -> Response:
        """Fork the run after the revision of the timeline row (``after``: the fork
        continues after that row's step, `flowledger.flow.fork`), with the form's state
        patch, once confirmed when steps that already ran run again; then show the fork.
        A refusal shows the form again with what is wrong."""
        try:
            ctx = await self._context(request, page=False)
            run_id = self._run_id(request)
            fields = await self._form(request)
            revision = self._revision(fields.get("revision", ""))
            fork = ctx.served.fork
            if fork is None:
                raise _Refusal(405, "this dashboard is read-only")
        except _Refusal as refusal:
            return self._refused(request, refusal)
        arguments: dict[str, Any] = {"run_id": run_id, "revision": revision, "after": True}
        try:
            patch_text = fields.get("patch", "").strip()
            if patch_text:
                arguments["patch"] = _patch(patch_text)
            plan = await fork.call("workflow_run_fork", {**arguments, "preview": True})
            run = await get_run(ctx.served.tools, run_id)
            if await asks_again(ctx.served, run, plan["again"]) and fields.get("confirm") != "yes":
                raise FormError(
                    "confirm",
                    "steps that already ran run again in this fork; tick "
                    "'Run these steps again' to fork anyway",
                )
            result = await fork.call("workflow_run_fork", arguments)
        except (FormError, ToolError) as exc:
            if isinstance(exc, ToolError) and self._tool_refusal(exc).status != 400:
                return self._refused(request, self._tool_refusal(exc))
            message = _said(exc) if isinstance(exc, ToolError) else str(exc)
            try:
                view = await self._fork_view(ctx, run_id, revision, error=message, values=fields)
            except ToolError as again:
                return self._refused(request, self._tool_refusal(again))
            except _Refusal as refusal:
                return self._refused(request, refusal)
            return self._page(request, "fork.html", view, ctx=ctx, status=400)
        return RedirectResponse(f"/runs/{result['run_id']}", status_code=303)

    async def _revalidate(self, request: Request) -> Response:
        """Revalidate a deployed run's pinned environment (what ``inspect_run`` does with
        ``revalidate``) and show the run with that readiness; nothing is written."""
        try:
            ctx = await self._context(request, page=False)
            run_id = self._run_id(request)
            await self._form(request)
            run = await get_run(ctx.served.tools, run_id)
            if revision_of(str(run["definition_version"])) is None:
                raise _Refusal(
                    409, f"run {run_id} is not a deployed run: it has no environment to revalidate"
                )
            if run["run_status"] in _TERMINAL:
                raise _Refusal(
                    409,
                    f"run {run_id} is {run['run_status']}: it never resumes, so there is "
                    "nothing to revalidate",
                )
            view = await self._run_view(ctx, run_id, Cursor(), revalidate=True)
            if view["deployed"] is None:
                raise _Refusal(
                    409, f"run {run_id} is not a deployed run: it has no environment to revalidate"
                )
        except ToolError as exc:
            return self._refused(request, self._tool_refusal(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        return self._page(request, "run.html", view, ctx=ctx)

    # -- live --------------------------------------------------------------------------------

    async def _run_events(self, request: Request) -> Response:
        try:
            ctx = await self._context(request, page=False)
            run_id = self._run_id(request)
            text = request.headers.get("last-event-id") or request.query_params.get("after")
            part = await self._run_part(ctx, run_id, text)
        except ToolError as exc:
            return self._refused(request, self._tool_refusal(exc))
        except _Refusal as refusal:
            return self._refused(request, refusal)
        return event_stream(ctx.served, part.produce, part.match, _SECURITY_HEADERS, self.streams)

    async def _run_part(self, ctx: _Ctx, run_id: str, cursor_text: str | None) -> Part:
        """One run's stream from the cursor on (`RunEvents`)."""
        cursor = parse_cursor(cursor_text)
        if cursor is None:
            raise _Refusal(400, "the stream's cursor must be <revision>:<event id>")
        run = await get_run(ctx.served.tools, run_id)
        picture = self.graphs.picture(
            ctx.served.session.catalog, str(run["definition_name"]), str(run["definition_version"])
        )
        looping = picture is not None and loops(picture.shape)
        events = RunEvents(
            ctx.served,
            run_id,
            cursor,
            entry_html=lambda entry: self._env.get_template("_entry.html").render(
                entry=entry, run_id=run_id, csrf=ctx.csrf, csrf_field=CSRF_FIELD, loops=looping
            ),
            run_event=lambda run, entries: self._run_event(ctx, run, entries),
        )
        return Part(events, lambda record: record.run_id == run_id)

    async def _run_event(
        self, ctx: _Ctx, run: dict[str, Any], entries: list[dict[str, Any]]
    ) -> dict[str, Any]:
        latest = await latest_vertices(ctx.served.session, str(run["run_id"]))
        parts = self._run_parts(
            ctx, run, entries, latest, inherited=await self._inherited(ctx, run)
        )
        return {
            "header": self._env.get_template("_header.html").render(parts),
            "pending": self._env.get_template("_pending.html").render(parts),
            "states": parts["states"],
            "pause": parts["pause_key"],
            "status": run["run_status"],
        }

    async def _runs_events(self, request: Request) -> Response:
        try:
            ctx = await self._context(request, page=False)
        except _Refusal as refusal:
            return self._refused(request, refusal)
        since = request.headers.get("last-event-id") or request.query_params.get("since", "")
        part = self._rows_part(ctx, request.query_params, since)
        return event_stream(ctx.served, part.produce, part.match, _SECURITY_HEADERS, self.streams)

    def _rows_part(self, ctx: _Ctx, query: Mapping[str, str], since: str) -> Part:
        """The runs table's stream for the page's filters (`RowEvents`)."""
        chosen = RunFilter(
            query.get("status", ""), query.get("definition", ""), query.get("q", "").strip()
        )

        async def row_html(run: dict[str, Any]) -> str | None:
            row = await self._row(ctx, run)
            return self._row_html(row) if chosen.matches_pause(row) else None

        events = RowEvents(ctx.served, chosen, since, row_html=row_html)
        return Part(events, lambda _record: True)

    async def _events(self, request: Request) -> Response:
        """The page streams of a browser's tabs in one stream (`flowledger.web.mux`)."""
        try:
            ctx = await self._context(request, page=False)
            addresses = request.query_params.getlist("sub")
            if not 1 <= len(addresses) <= MAX_PARTS:
                raise _Refusal(400, f"a stream carries 1..{MAX_PARTS} sub streams (sub=ADDRESS)")
            parts = [await self._sub_part(ctx, address) for address in addresses]
        except _Refusal as refusal:
            return self._refused(request, refusal)
        streams = Streams(parts)
        return event_stream(ctx.served, streams, streams.match, _SECURITY_HEADERS, self.streams)

    async def _sub_part(self, ctx: _Ctx, address: str) -> Part | Refused:
        """The page stream at ``address``, or what its own address would have refused."""
        split = urlsplit(address)
        query = dict(parse_qsl(split.query))
        try:
            if split.scheme or split.netloc or split.fragment:
                raise _Refusal(400, "a sub stream is a path on this server")
            if split.path == "/events/runs":
                return self._rows_part(ctx, query, query.get("since", ""))
            run_id = split.path.removeprefix("/events/runs/")
            if run_id == split.path or "/" in run_id:
                raise _Refusal(404, f"no stream at {split.path!r}")
            if not is_id(run_id):
                raise _Refusal(404, f"no run {run_id!r}: a run ID is a UUID")
            return await self._run_part(ctx, run_id, query.get("after"))
        except ToolError as exc:
            refusal = self._tool_refusal(exc)
            return Refused(refusal.status, str(refusal))
        except _Refusal as refusal:
            return Refused(refusal.status, str(refusal))

    # -- metrics ------------------------------------------------------------------------------

    async def _metrics(self, request: Request) -> Response:
        """The process's metrics (docs/observability.md) for any signed-in client when
        every token reaches the same session: they are the whole process's counts, never a
        run's id, input or state."""
        if self.gate.uses_tokens:
            try:
                session_id = self.gate.session_of(request)
            except TooManyFailuresError as exc:
                return self._refused(request, _Refusal.throttled(exc))
            if session_id is None:
                refusal = _Refusal(
                    401,
                    "send 'Authorization: Bearer <token>' with a valid token",
                    headers={"WWW-Authenticate": 'Bearer realm="flowledger"'},
                )
                return self._refused(request, refusal)
        return await metrics_response(serves_one_session=self.gate.auth.serves_one_session)

    # -- signing in --------------------------------------------------------------------------

    async def _login_page(self, request: Request) -> Response:
        return self._page(request, "login.html", {"error": ""})

    async def _login(self, request: Request) -> Response:
        try:
            fields = await self._form(request)
        except _Refusal as refusal:
            return self._refused(request, refusal)
        if not self.gate.uses_tokens:
            return RedirectResponse("/runs", status_code=303)
        try:
            login = self.gate.log_in(request, fields.get("token", "").strip())
        except TooManyFailuresError as exc:
            return self._page(
                request, "login.html", {"error": str(exc)}, status=429, headers=exc.headers
            )
        if login is None:
            return self._page(request, "login.html", {"error": "unknown token"}, status=401)
        response = RedirectResponse("/runs", status_code=303)
        self._set_cookie(request, response, LOGIN_COOKIE, login)
        return response

    async def _logout(self, request: Request) -> Response:
        try:
            await self._form(request)
        except _Refusal as refusal:
            return self._refused(request, refusal)
        self.gate.log_out(request)
        response = RedirectResponse("/login" if self.gate.uses_tokens else "/runs", 303)
        response.delete_cookie(LOGIN_COOKIE, path="/")
        return response
