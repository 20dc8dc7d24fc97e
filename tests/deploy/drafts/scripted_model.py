"""A scripted model: an MCP client that builds, publishes, deploys and runs a workflow
through the authoring tools knowing only what the server answers plus its goal.

The goal (`Goal`) names what a person would ask for: "ask `get_current_time` of the
`time` source, pause for a person to approve, then have `echo` of the `everything`
source repeat the time". Everything else is read from the server: which tools exist and
which of them change things (``tools/list`` and its annotations), the sources that offer
the goal's tools (``capability_list``), the tools' required arguments
(``capability_inspect``), the draft's node ids, state fields and the expression that
reads a tool's result (the draft answers), the input a run needs (the draft's
``input_schema``), the resume payload (the paused run's ``resume_schema``), and how to
leave an invalid state (the diagnostics' ``next_actions`` and the ``explain`` answer).

The model deliberately passes through one invalid state: it adds the pause node before
routing to it (``unreachable_node``). It then follows the diagnostic's next actions: a
next action that edits the draft is taken as it is (only the arguments it leaves out
are completed from the tool's input schema); when the next actions only read
(``explain``, ``draft_get``), the model calls them and takes the edit tool the
``explain`` fix names (a tool of ``tools/list``). Today a draft diagnostic offers
``explain`` and ``draft_get`` only, so the second way is the one taken; once the contract
checks offer edits as next actions (the ``draft_patch`` that adds a missing argument, ...)
the model takes those as they are, and a next action that would delete the node the
goal needs is passed over. What the model itself knows is the shape of an ``interrupt``
node (the goal's pause) and which node comes before it.

Every call is recorded in `Transcript` (the tool, its arguments, whether it failed).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp import Client

__all__ = ["Goal", "ScriptedModel", "ToolFailed", "Transcript"]

# the tools of the authoring loop the model expects the server to list
LOOP = (
    "capability_list",
    "capability_inspect",
    "draft_create",
    "draft_patch",
    "draft_add_tool",
    "draft_set_output",
    "draft_validate",
    "draft_publish",
    "run_deployment",
    "inspect_run",
    "resume_run",
    "explain",
)


@dataclass(frozen=True)
class Goal:
    """What the model is asked to build (names only: the sources and tools to use, and the
    names the model gives its own parts)."""

    draft: str = "time_echo"
    version: str = "1.0.0"
    clock: tuple[str, str] = ("time", "get_current_time")
    repeat: tuple[str, str] = ("everything", "echo")
    pause: str = "approve"  # the model's name for the pause node
    approval: str = "approved"  # ... for the person's answer
    echoed: str = "echoed"  # ... for what echo answered
    question: str = "Echo this time?"
    timezone: str = "Europe/Paris"  # the run's input, for the one string input the draft asks


class ToolFailed(Exception):
    """A tool call answered an error (the text is the server's message)."""


@dataclass
class Transcript:
    """Every tool call the model made, in order."""

    calls: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.calls)

    def tools(self) -> list[str]:
        return [call["tool"] for call in self.calls]

    def render(self) -> str:
        lines = []
        for number, call in enumerate(self.calls, start=1):
            arguments = json.dumps(call["arguments"], separators=(",", ":"))
            marker = "!" if call["failed"] else " "
            seconds = f"{call['seconds']:6.2f}s"
            lines.append(f"{number:3d}{marker} {seconds} {call['tool']} {arguments[:100]}")
        return "\n".join(lines)


def _text(result: types.CallToolResult) -> str:
    blocks = [block.text for block in result.content if isinstance(block, types.TextContent)]
    assert len(blocks) == 1, result.content
    return blocks[0]


class ScriptedModel:
    """See the module. One model per client; `build_and_run` does the whole loop."""

    def __init__(self, client: Client, goal: Goal | None = None) -> None:
        self.client = client
        self.goal = goal or Goal()
        self.transcript = Transcript()
        self.tools: dict[str, types.Tool] = {}
        self.repairs: list[dict[str, Any]] = []  # each invalid state and the edit that left it
        self.revision = 0
        self.paused: dict[str, Any] = {}  # the paused run, as inspect_run answered it

    # -- talking to the server --------------------------------------------------------

    async def learn_tools(self) -> None:
        listed = await self.client.list_tools()
        self.tools = {tool.name: tool for tool in listed.tools}
        missing = [name for name in LOOP if name not in self.tools]
        assert not missing, f"the server does not list {missing}"

    def mutating(self, name: str) -> bool:
        annotations = self.tools[name].annotations
        return annotations is None or annotations.read_only_hint is not True

    async def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Call a listed tool; its JSON answer, or `ToolFailed`."""
        assert name in self.tools, f"{name} is not a tool the server lists"
        began = time.perf_counter()
        result = await self.client.call_tool(name, dict(arguments))
        self.transcript.calls.append(
            {
                "tool": name,
                "arguments": dict(arguments),
                "failed": result.is_error,
                "seconds": time.perf_counter() - began,
            }
        )
        if result.is_error:
            raise ToolFailed(_text(result))
        answer = json.loads(_text(result))
        if isinstance(answer, dict) and name.startswith("draft_") and "revision" in answer:
            self.revision = answer["revision"]
        return answer

    def complete(
        self, name: str, arguments: Mapping[str, Any], known: Mapping[str, Any]
    ) -> dict[str, Any]:
        """``arguments`` with every required property of tool ``name``'s input schema it
        lacks taken from ``known`` (the revision always the current one)."""
        schema = self.tools[name].input_schema
        completed = dict(arguments)
        if "revision" in schema.get("properties", {}):
            completed["revision"] = self.revision
        for required in schema.get("required", []):
            if required not in completed:
                assert required in known, f"the model cannot fill {name}'s {required!r}"
                completed[required] = known[required]
        return completed

    # -- finding capabilities ---------------------------------------------------------

    async def capability(self, source: str, tool: str) -> dict[str, Any]:
        """The catalog entry of ``tool`` of ``source`` (searched by the tool's name), and
        its input schema from ``capability_inspect``."""
        found = await self.call("capability_list", {"query": tool})
        entries = [r for r in found["results"] if (r["source"], r["tool"]) == (source, tool)]
        assert entries, f"capability_list does not offer {source}/{tool}: {found['results']}"
        inspected = await self.call("capability_inspect", {"source": source, "tool": tool})
        return {**entries[0], "input_schema": inspected["tool"]["input_schema"]}

    # -- leaving an invalid state -----------------------------------------------------

    async def repair(self, answer: dict[str, Any], before: Mapping[str, str]) -> dict[str, Any]:
        """Follow the diagnostics' next actions until the draft is valid. ``before`` maps
        a node of the goal to the node that should lead to it."""
        for _attempt in range(5):
            if answer["valid"]:
                return answer
            diagnostic = answer["diagnostics"][0]
            actions = diagnostic["next_actions"]
            assert actions, f"a diagnostic without next actions: {diagnostic}"
            pointer = diagnostic["pointer"].split("/")
            subject = pointer[2] if len(pointer) > 2 and pointer[1] == "nodes" else None
            known = {"draft": self.goal.draft}
            if subject is not None:  # the node the diagnostic is about, and what leads to it
                known["to"] = subject
                if subject in before:
                    known["from"] = before[subject]
            edit = next(
                (
                    action
                    for action in actions
                    if action["tool"] in self.tools
                    and self.mutating(action["tool"])
                    and not _removes(action, diagnostic["pointer"])
                ),
                None,
            )
            fix = ""
            if edit is None:  # read what the server suggests, then take the tool it names
                for action in actions:
                    read = await self.call(action["tool"], action["arguments"])
                    if action["tool"] == "explain":
                        fix += f" {read['fix']}"
                named = [
                    name
                    for name in re.findall(r"[a-z_]+", fix)
                    if name in self.tools and name.startswith("draft_") and self.mutating(name)
                ]
                assert named, f"neither the next actions nor explain name an edit: {fix!r}"
                edit = {"tool": named[0], "arguments": {}}
            arguments = self.complete(edit["tool"], edit["arguments"], known)
            fixed = await self.call(edit["tool"], arguments)
            self.repairs.append(
                {
                    "diagnostic": diagnostic,
                    "next_actions": actions,
                    "fix": fix.strip(),
                    "edit": {"tool": edit["tool"], "arguments": arguments},
                }
            )
            answer = fixed
        raise AssertionError(f"still invalid after 5 repairs: {answer['diagnostics']}")

    # -- the loop ---------------------------------------------------------------------

    async def build_and_run(self) -> dict[str, Any]:
        """Discover, draft, repair, validate, publish with deploy, run, resume: the
        completed run's answer."""
        goal = self.goal
        await self.learn_tools()
        clock = await self.capability(*goal.clock)
        repeat = await self.capability(*goal.repeat)

        # 1. a draft calling the clock: its node, the state field its result goes to and
        #    the expression that reads a tool's text are read from the answer
        draft = await self.call(
            "draft_create",
            {"name": goal.draft, "from": {"source": clock["source"], "tool": clock["tool"]}},
        )
        document = draft["document"]
        clock_node = document["start"]
        (time_field, result_text), *_ = document["nodes"][clock_node]["assign"].items()
        (end_node,) = [k for k, v in document["nodes"].items() if v["kind"] == "end"]

        # 2. the pause, added before anything routes to it: invalid until it is routed
        paused = await self.call(
            "draft_patch",
            {
                "draft": goal.draft,
                "revision": self.revision,
                "operations": [
                    {"op": "add", "path": f"/state/{goal.approval}", "value": {}},
                    {"op": "add", "path": f"/state/{goal.echoed}", "value": {}},
                    {
                        "op": "add",
                        "path": f"/nodes/{goal.pause}",
                        "value": self._pause(time_field, end_node),
                    },
                ],
            },
        )
        assert not paused["valid"], "the model meant to pass through an invalid state"
        await self.repair(paused, before={goal.pause: clock_node})

        # 3. echo after the pause; a required argument the step could not map is given
        #    the clock's time (the goal: repeat the time)
        added = await self.call(
            "draft_add_tool",
            {
                "draft": goal.draft,
                "revision": self.revision,
                "source": repeat["source"],
                "tool": repeat["tool"],
                "after": goal.pause,
                "assign": {goal.echoed: result_text},
            },
        )
        (echo_node,) = set(added["document"]["nodes"]) - set(document["nodes"]) - {goal.pause}
        unmapped = added["unmapped"]
        required = repeat["input_schema"].get("required", [])
        assert len(unmapped) == 1, f"echo's required arguments: {required}, unmapped {unmapped}"
        mapped = await self.call(
            "draft_patch",
            {
                "draft": goal.draft,
                "revision": self.revision,
                "operations": [
                    {
                        "op": "add",
                        "path": f"/nodes/{echo_node}/arguments/{unmapped[0]}",
                        "value": f"${{ state.{time_field} }}",
                    }
                ],
            },
        )
        await self.repair(mapped, before={})

        # 4. the output: the time, the person's answer and the echo
        fields = (time_field, goal.approval, goal.echoed)
        output = await self.call(
            "draft_set_output",
            {
                "draft": goal.draft,
                "revision": self.revision,
                "node": end_node,
                "output": {name: f"${{ state.{name} }}" for name in fields},
                "output_schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": list(fields),
                    "properties": {
                        time_field: {"type": ["string", "null"]},
                        goal.approval: {"type": "boolean"},
                        goal.echoed: {"type": ["string", "null"]},
                    },
                },
            },
        )
        output = await self.repair(output, before={})

        # 5. check against the catalog, publish with a deployment, run
        checked = await self.call("draft_validate", {"draft": goal.draft})
        assert checked["deployable"], checked
        published = await self.call(
            "draft_publish",
            {
                "draft": goal.draft,
                "revision": checked["revision"],
                "version": goal.version,
                "deploy": True,
            },
        )
        deployment = published["deployment"]["name"]
        input_schema = output["document"]["input_schema"]
        (needed,) = input_schema["required"]
        run = await self.call(
            "run_deployment",
            {"deployment": deployment, "input": {needed: goal.timezone}, "wait_seconds": 60},
        )
        # the pause is durable: read back without contacting the sources again
        inspected = await self.call("inspect_run", {"run_id": run["run_id"], "revalidate": False})
        self.paused = inspected
        resume_schema = inspected["interrupt"]["resume_schema"]
        payload = {
            name: True
            for name in resume_schema["required"]
            if resume_schema["properties"][name]["type"] == "boolean"
        }
        return dict(
            await self.call(
                "resume_run",
                {"run_id": run["run_id"], "payload": payload, "wait_seconds": 60},
            )
        )

    def _pause(self, time_field: str, then: str) -> dict[str, Any]:
        goal = self.goal
        return {
            "kind": "interrupt",
            "request": {"question": goal.question, "time": f"${{ state.{time_field} }}"},
            "resume_schema": {
                "type": "object",
                "additionalProperties": False,
                "required": [goal.approval],
                "properties": {goal.approval: {"type": "boolean"}},
            },
            "assign": {goal.approval: f"${{ resume.{goal.approval} }}"},
            "next": then,
        }


def _removes(action: Mapping[str, Any], pointer: str) -> bool:
    """Whether a next action would delete what the diagnostic points at (the goal needs
    it; the model routes to it instead)."""
    operations = action.get("arguments", {}).get("operations", [])
    return any(op.get("op") == "remove" and op.get("path") == pointer for op in operations)
