"""A research agent as a flowledger app: ``flowledger --app research_agent:catalog``.

The graph is the shape most agent loops have::

    plan -> search_web  \\
         -> search_papers -> draft -> critique --(pick)--> draft      (revise)
                                                      \\--> approval --(pick)--> publish
                                                                        \\--> draft (feedback)

* ``plan`` splits the question into search queries.
* ``search_web`` and ``search_papers`` are two tool calls made in parallel (one super-step).
  The web search is rate limited on its first call, like real APIs are; ``Retry(3)``
  gives it three attempts in total.
* ``draft`` writes an answer from the notes; ``critique`` reviews it, and its route's
  ``pick`` sends it back to ``draft`` until it cites both sources (or the rounds run out).
* ``approval`` pauses the run with ``flow.interrupt`` until a person or a model answers
  ``{"approved": true}``, or ``{"approved": false, "feedback": "..."}`` to revise again.
* ``publish`` records the answer.

The tools are local stand-ins (a tiny corpus), so the example runs anywhere; replace
`search_web` and `search_papers` with real calls. Nothing here chooses storage: the graph
is compiled without a store, and the host (the CLI, the MCP server, a worker) binds the
catalog to its own database.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from pydantic import BaseModel, Field

from flowledger import flow
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata

__all__ = ["Research", "catalog", "research_definition"]

STEP_SECONDS = 0.05  # a little time per step, so the progress display has something to show

WEB: dict[str, str] = {
    "durable": "Durable execution persists every step, so a crash resumes where it stopped.",
    "workflow": "Workflow engines replay or checkpoint state between steps.",
    "checkpoint": "Checkpoints store the state after each step, keyed by run and revision.",
    "agent": "Agents loop: plan, call tools, reflect, and ask a person when unsure.",
}
PAPERS: dict[str, str] = {
    "durable": "Event sourcing makes state a fold over an append-only log (Fowler, 2005).",
    "checkpoint": "Coordinated checkpointing bounds recovery work (Chandy and Lamport, 1985).",
    "agent": "ReAct interleaves reasoning with tool use (Yao et al., 2023).",
}

_rate_limited: set[str] = set()  # executions whose first web call was refused


class Research(BaseModel):
    """The run's state. Every input-schema property is a field here (registration checks
    it); the rest is filled in by the vertices."""

    question: str
    max_rounds: int = 3
    queries: list[str] = Field(default_factory=list)
    web_notes: list[str] = Field(default_factory=list)
    paper_notes: list[str] = Field(default_factory=list)
    draft: str = ""
    rounds: int = 0
    critique: str = ""
    feedback: str = ""
    approved: bool | None = None
    answer: str = ""


# -- the tools (stand-ins) ---------------------------------------------------------------


async def search_web_tool(query: str) -> str | None:
    await asyncio.sleep(STEP_SECONDS)
    return WEB.get(query)


async def search_papers_tool(query: str) -> str | None:
    await asyncio.sleep(STEP_SECONDS)
    return PAPERS.get(query)


# -- the vertices ------------------------------------------------------------------------


async def plan(state: Research) -> dict[str, Any]:
    words = re.findall(r"[a-z]+", state.question.lower())
    known = set(WEB) | set(PAPERS)
    queries = [word for word in dict.fromkeys(words) if word in known] or words[:3]
    return {"queries": queries}


async def search_web(state: Research) -> dict[str, Any]:
    # The first call of every execution is refused, as a rate-limited API would; the
    # vertex's Retry(3) makes up to three attempts in total, so the second one succeeds.
    key = flow.run_info().idempotency_key
    if key not in _rate_limited:
        _rate_limited.add(key)
        raise ConnectionError("429 Too Many Requests from the search API")
    found = await asyncio.gather(*(search_web_tool(query) for query in state.queries))
    return {"web_notes": [note for note in found if note]}


async def search_papers(state: Research) -> dict[str, Any]:
    found = await asyncio.gather(*(search_papers_tool(query) for query in state.queries))
    return {"paper_notes": [note for note in found if note]}


async def draft(state: Research) -> dict[str, Any]:
    await asyncio.sleep(STEP_SECONDS)
    rounds = state.rounds + 1
    # A first draft uses the web only; a revision adds the papers the critique asked for.
    notes = state.web_notes if rounds == 1 else [*state.web_notes, *state.paper_notes]
    text = " ".join(notes) or "No sources were found."
    if state.feedback:
        text += f" (Revised for: {state.feedback})"
    return {"draft": text, "rounds": rounds}


async def critique(state: Research) -> dict[str, Any]:
    await asyncio.sleep(STEP_SECONDS)
    cites_papers = any(note in state.draft for note in state.paper_notes)
    if state.paper_notes and not cites_papers:
        return {"critique": "cite the papers, not only the web"}
    return {"critique": ""}


def after_critique(state: Research) -> str:
    """Revise while the critique has something to say and rounds remain, else ask."""
    if state.critique and state.rounds < state.max_rounds:
        return "draft"
    return "approval"


async def approval(state: Research) -> dict[str, Any]:
    answer = flow.interrupt(
        {
            "question": "Send this answer?",
            "draft": state.draft[:500],
            "rounds": state.rounds,
        }
    )
    return {"approved": bool(answer["approved"]), "feedback": answer.get("feedback", "")}


def after_approval(state: Research) -> str:
    return "publish" if state.approved else "draft"


async def publish(state: Research) -> dict[str, Any]:
    await asyncio.sleep(STEP_SECONDS)
    return {"answer": state.draft}


# -- the definition and the catalog ------------------------------------------------------

INPUT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["question"],
    "properties": {
        "question": {"type": "string", "minLength": 3, "maxLength": 500},
        "max_rounds": {"type": "integer", "minimum": 1, "maximum": 5},
    },
}
RESUME_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["approved"],
    "properties": {
        "approved": {"type": "boolean"},
        "feedback": {"type": "string", "maxLength": 500},
    },
}
LABELS = {
    "plan": "plan",
    "search_web": "web search",
    "search_papers": "paper search",
    "draft": "draft",
    "critique": "critique",
    "approval": "human approval",
    "publish": "publish",
}


def research_graph() -> flow.Graph[Research]:
    graph: flow.Graph[Research] = flow.Graph("research_agent", state=Research)
    graph.add_vertex("plan", plan)
    graph.add_vertex("search_web", search_web, retry=flow.Retry(3, backoff=0.05))
    graph.add_vertex("search_papers", search_papers)
    graph.add_vertex("draft", draft)
    graph.add_vertex("critique", critique)
    graph.add_vertex("approval", approval)
    graph.add_vertex("publish", publish)
    for search in ("search_web", "search_papers"):  # two edges out: they run in parallel
        graph.add_edge("plan", search)
        graph.add_edge(search, "draft")  # and draft waits for both
    graph.add_edge("draft", "critique")
    graph.add_route("critique", targets=["draft", "approval"], pick=after_critique)
    graph.add_route("approval", targets=["publish", "draft"], pick=after_approval)
    return graph


def _summary(state: Research) -> str:
    if state.answer:
        return f"published after {state.rounds} draft(s)"
    return f"draft {state.rounds}, waiting for approval" if state.rounds else "researching"


def research_definition() -> TypedDefinition[Research]:
    # No store: a catalog is bound to its host's database, which keeps the checkpoints.
    runner = research_graph().compile(entry="plan", finish="publish", version="1")
    metadata = Metadata(
        "research",
        "v1",
        description="Research a question: search the web and papers in parallel, draft, "
        "self-critique, and ask for approval before publishing.",
        input_schema=INPUT_SCHEMA,
        resume_schema=RESUME_SCHEMA,
        vertices=[VertexMetadata(label, vertex) for vertex, label in LABELS.items()],
    )
    return TypedDefinition(metadata, runner, summarizer=_summary)


def catalog() -> Catalog:
    """What ``--app research_agent:catalog`` loads: a function returning a Catalog."""
    research = Catalog()
    research.register(research_definition())
    return research
