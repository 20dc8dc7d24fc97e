"""`explain`: cause, fix and a small example for every code the deploy layer emits.

The codes are those of artifact issues (deploy/artifacts/), deployment and source-document
issues, deployment diagnostics (deploy/deployments/diagnostics.py), source and registry
errors (deploy/sources/errors.py, deploy/registry/errors.py), deployed-run errors
(deploy/runs/errors.py), the bridge's ``graph_changed`` and ``definition_missing``, and
the drafts' own codes.
``tests/deploy/drafts/test_explain.py`` collects every code the source emits and fails
when one has no entry here.
"""

from __future__ import annotations

from typing import Any, Final

from .errors import DraftError

__all__ = ["EXPLANATIONS", "UnknownCodeError", "explain"]


class UnknownCodeError(DraftError, LookupError):
    code = "code_unknown"

    def __init__(self, code: str) -> None:
        self.unknown = code
        super().__init__(
            f"no code {code[:64]!r}: codes are the snake_case words in diagnostics and "
            "errors (the `code` field, or the [code] at the start of a tool error)"
        )


# code -> (cause, fix, example)
EXPLANATIONS: Final[dict[str, tuple[str, str, str]]] = {
    # -- reading a document (YAML or JSON) ----------------------------------------------
    "syntax": (
        "The text is not valid YAML or JSON.",
        "Fix the syntax at the line and column the message names.",
        "nodes: {done: {kind: end, outcome: done}}   # braces and colons balanced",
    ),
    "empty": (
        "The document has no content.",
        "Write the artifact (or deployment, or source) document.",
        "format: flowledger.artifact/v1\nname: hello\n...",
    ),
    "many_documents": (
        "The YAML text holds more than one document (a second `---`).",
        "Keep one document per artifact; save others separately.",
        "format: flowledger.artifact/v1   # no second '---' below",
    ),
    "not_utf8": (
        "The bytes are not UTF-8 text.",
        "Save the file as UTF-8.",
        "iconv -f latin1 -t utf-8 artifact.yaml > fixed.yaml",
    ),
    "too_large": (
        "The document (or its canonical form) is over the size limit.",
        "Move parts into child artifacts (a `workflow` node runs a saved child).",
        "nodes: {review: {kind: workflow, workflow: approval, input: {}, next: done}}",
    ),
    "too_deep": (
        "Objects and arrays nest deeper than the limit (48).",
        "Flatten the data; keep large nested values out of the document.",
        '{"a": {"b": 1}} rather than 50 levels of nesting',
    ),
    "too_long": (
        "A string (an expression, a description) is over its byte limit.",
        "Shorten it; split a long expression over `set` nodes.",
        'description: "Weather for a city" (at most 1024 bytes)',
    ),
    "duplicate_key": (
        "A key appears twice in one object; only one value can be meant.",
        "Remove or rename one of them.",
        "nodes: {a: ..., b: ...}   # not two `a:` keys",
    ),
    "key_not_string": (
        "A YAML key is a number, boolean or null; JSON keys are strings.",
        "Quote the key.",
        '"1.0": value   # not 1.0: value',
    ),
    "yaml_alias": (
        "YAML anchors, aliases and merge keys are not supported.",
        "Write the value out where it is used.",
        "arguments: {city: '${ input.city }'}   # no &anchor / *alias / <<:",
    ),
    "yaml_tag": (
        "A YAML tag other than the core ones (!!str, !!int, ...) or a value that does not fit "
        "its tag.",
        "Remove the tag, or write a value of that type.",
        "version: '1.0'   # not !!python/object or !!int abc",
    ),
    "not_finite": (
        "A number is NaN or infinite, which JSON has no form for.",
        "Use a finite number, or null.",
        "timeout: 30   # not .inf",
    ),
    "number_range": (
        "An integer beyond ±(2**53 - 1) has no exact JSON form.",
        "Write it as a string.",
        'id: "9007199254740993"',
    ),
    "not_unicode": (
        "A string holds a lone surrogate, which is not valid Unicode.",
        "Remove the broken character.",
        '"caf\\u00e9" (a whole character, not half a pair)',
    ),
    "not_json": (
        "A value is not JSON data (a Python object given from code, or no canonical form).",
        "Use only objects, arrays, strings, finite numbers, booleans and null.",
        '{"when": "2026-01-01"}   # a string, not a datetime',
    ),
    "not_object": (
        "The document is not a JSON object.",
        "Write a mapping at the top level.",
        '{"format": "flowledger.artifact/v1", "name": "hello", ...}',
    ),
    # -- artifact structure -------------------------------------------------------------
    "field_missing": (
        "A required field is absent (or a child's required input property is not given).",
        "Add the field the place names.",
        "nodes: {done: {kind: end, outcome: done}}   # `outcome` is required",
    ),
    "field_unknown": (
        "A field the format does not have (often a misspelling).",
        "Remove it, or correct its spelling.",
        "next: done   # not `then: done`",
    ),
    "bad_kind": (
        "A node's `kind` is missing or not one of tool, set, switch, parallel, interrupt, "
        "workflow, foreach, end (a foreach body's: tool, value, workflow, sequence).",
        "Give the node (or the body) one of the kinds.",
        "greet: {kind: set, assign: {text: '${ input.name }'}, next: done}",
    ),
    "bad_name": (
        "A name does not match its pattern (node ids and fields ^[a-z][a-z0-9_]{0,63}$, artifact "
        "names ^[a-z][a-z0-9_]{2,63}$, versions ^[a-z0-9][a-z0-9_.-]{0,63}$).",
        "Use lowercase letters, digits and underscores.",
        "nodes: {fetch_weather: ...}   # not Fetch-Weather",
    ),
    "bad_key": (
        "A key of a map (node id, state field, dependency) does not match its pattern.",
        "Rename the key: ^[a-z][a-z0-9_]{0,63}$.",
        "state: {total_count: {}}   # not totalCount",
    ),
    "bad_value": (
        "A value has the wrong type or is out of range.",
        "Give the type the message names.",
        "timeout: 20   # a number of seconds, not '20s'",
    ),
    "duplicate": (
        "Something is listed twice (a tool of a dependency, a branch).",
        "List it once.",
        "tools: [get_current_time]   # not [get_current_time, get_current_time]",
    ),
    "bad_label": (
        "A node label holds NUL, CR or LF.",
        "Keep a label on one line.",
        "label: Fetch the weather",
    ),
    "not_a_template": (
        "An expression where only literal values are read (a state field's `initial`, ...).",
        "Compute the value in a `set` node instead.",
        "state: {count: {reduce: sum, initial: 0}}",
    ),
    "bad_initial": (
        "A state field's `initial` does not fit its reducer (append: an array, merge: an object, "
        "sum: a number).",
        "Give an initial value of the reducer's type, or none.",
        "state: {sections: {reduce: append, initial: []}}",
    ),
    "invalid_schema": (
        "An input, output or resume schema is not a valid closed object schema.",
        'Give "type": "object" and "additionalProperties": false on every object.',
        '{"type": "object", "additionalProperties": false, "properties": {"city": {"type": '
        '"string"}}}',
    ),
    "too_many_expressions": (
        "The artifact has more expressions than the limit (4096).",
        "Move parts into child artifacts.",
        "a `workflow` node running a saved child holds its expressions",
    ),
    # -- expressions ---------------------------------------------------------------------
    "expression_syntax": (
        "A `${ ... }` expression is not valid JMESPath (or is empty).",
        "Fix the expression at the place named; strings in JMESPath use single quotes.",
        "\"${ join(' ', [input.first, input.last]) }\"",
    ),
    "expression_too_long": (
        "One expression is over 2048 characters.",
        "Split it over `set` nodes.",
        "set: {assign: {part: '${ ... }'}} then use state.part",
    ),
    "not_an_expression": (
        "A condition (a switch case's `when`) or a foreach's `items` is not one whole "
        "`${ ... }` expression.",
        "Write the condition as one expression.",
        "when: '${ state.approved }'",
    ),
    "partial_expression": (
        "`${` appears inside a longer string; expressions are not interpolated into text.",
        "Make the expression the whole string, joining text with join().",
        "\"${ join('', ['Hello ', input.name]) }\"",
    ),
    "not_in_scope": (
        "An expression reads a name not available there (scope is input, state, result in a "
        "tool/workflow assign, resume in an interrupt assign).",
        "Read only the names the hint lists; keep a result in state to use it later.",
        "assign: {text: '${ result.text }'} on the tool node, then '${ state.text }' later",
    ),
    "expression_function": (
        "An unknown JMESPath function, wrong arity, or `&expr` outside sort_by/max_by/min_by/map.",
        "Use a JMESPath built-in function with its arguments.",
        "'${ length(state.items) }'",
    ),
    "expression_failed": (
        "An expression failed while running (a function given the wrong type, a result too large).",
        "Check the types the expression reads; guard with a switch or default values.",
        "'${ join(', ', state.names || `[]`) }'",
    ),
    # -- references and the graph -------------------------------------------------------
    "unknown_node": (
        "`start`, `next`, a case, a branch, a join or a default names a node that does not exist.",
        "Name an existing node or add it (draft_connect routes to existing nodes).",
        "next: done   # with nodes: {done: {kind: end, outcome: done}}",
    ),
    "unknown_dependency": (
        "A tool node names a dependency that `dependencies` does not declare.",
        "Declare it (draft_add_tool does), or fix the name.",
        "dependencies: {clock: {tools: [get_current_time]}}",
    ),
    "unknown_tool": (
        "A tool node calls a tool its dependency does not list in `tools`.",
        "Add the tool to the dependency's `tools`.",
        "dependencies: {clock: {tools: [get_current_time, convert_time]}}",
    ),
    "unused_tool": (
        "A dependency lists a tool no node calls; deployments would check and pin it anyway.",
        "Remove it from `tools`, or add a node calling it.",
        "dependencies: {clock: {tools: [get_current_time]}}",
    ),
    "foreach_concurrency": (
        "A foreach's `max_concurrency` is over the limit (16), or is set on a serial "
        "foreach (which runs one item at a time).",
        "Use 1 to 16 with `mode: concurrent`; leave it out for `mode: serial`.",
        "mode: concurrent\nmax_concurrency: 8",
    ),
    "foreach_child_interrupt": (
        "A foreach's workflow body runs a child whose closure (the child or any of its "
        "children) has an interrupt node; a foreach item cannot pause.",
        "Run a child without interrupt nodes in the foreach, and ask before or after it "
        "(an interrupt node, or a workflow node outside the foreach, may pause).",
        "approve: {kind: interrupt, ..., next: each}   # ask once, then map",
    ),
    "foreach_sequence_node": (
        "A foreach's sequence body holds a node it cannot run per item: an `interrupt` "
        "(a foreach item cannot pause), a `workflow` node, or a foreach with a `workflow` "
        "body (a sequence runs no child artifact).",
        "Ask before or after the foreach; to run a saved child per item, make the body "
        "`{kind: workflow, ...}`. A sequence holds tool, set, switch, parallel, foreach "
        "and end nodes.",
        "body: {kind: sequence, start: call, nodes: {call: {kind: tool, ..., next: ok}, "
        "ok: {kind: end, outcome: ok, output: {text: '${ item }'}}}}",
    ),
    "foreach_into": (
        "A foreach's `into` field has a reducer other than `replace`; the foreach writes "
        "the whole list of results into it once.",
        "Declare the field with `reduce: replace` (the default), or collect into another.",
        "state: {results: {}}\n# node: into: results",
    ),
    "unknown_child": (
        "A workflow node (or a foreach's workflow body) runs an artifact not listed in `children`.",
        "Add it to `children` with its exact version.",
        "children: {approval: '1.0.0'}",
    ),
    "unused_child": (
        "`children` lists an artifact no workflow node or foreach body runs.",
        "Remove it, or add a workflow node (or a foreach workflow body) running it.",
        "children: {}   # or nodes: {review: {kind: workflow, workflow: approval, ...}}",
    ),
    "unknown_state_field": (
        "An `assign` writes a state field that `state` does not declare.",
        "Declare the field under `state`.",
        "state: {text: {}}",
    ),
    "unknown_field": (
        "A child's input property or output field that its schema does not have, or a field read "
        "that does not exist.",
        "Use the property names of the child's closed schema (the hint lists them).",
        "input: {text: '${ state.briefing }'}   # the child's input has `text`",
    ),
    "input_invalid": (
        "A workflow node's literal input does not validate against the child's input schema.",
        "Give values of the types the child's input_schema asks for.",
        "input: {count: 3}   # not '3' when count is an integer",
    ),
    "output_invalid": (
        "An end node's literal output does not validate against `output_schema`.",
        "Make the output match the schema, or change the schema (draft_set_output does both).",
        "output: {text: '${ state.text }'} with output_schema properties {text: {type: string}}",
    ),
    "no_end": (
        "There is no `end` node; a run could never finish.",
        "Add one and route to it.",
        "nodes: {done: {kind: end, outcome: done}}",
    ),
    "unreachable_node": (
        "No path from `start` reaches this node.",
        "Route to it (draft_connect) or remove it.",
        "draft_connect {from: fetch, to: summarize}",
    ),
    "no_way_to_end": (
        "From this node no `end` can be reached: a loop without an exit.",
        "Give the loop an exit: a switch case leading towards an end.",
        "cases: [{when: '${ state.done }', next: finish}]",
    ),
    "shared_join": (
        "Two parallel nodes use the same join node.",
        "Give each parallel its own join (a `set` node works).",
        "gather_a: {join: after_a}, gather_b: {join: after_b}",
    ),
    "bad_join": (
        "A parallel's join is the parallel itself, one of its branches, or is not where every "
        "branch arrives.",
        "Make the join a node after the branches that each branch leads to.",
        "gather: {kind: parallel, branches: [a, b], join: compose}; a: {next: compose}",
    ),
    "branch_without_join": (
        "A branch of a parallel never reaches the parallel's join.",
        "Route the branch's last node to the join.",
        "headlines: {..., next: compose}   # compose is the join",
    ),
    "branch_loop": (
        "A branch leads back to its own parallel node.",
        "Loop after the join instead, with a switch.",
        "compose: {kind: switch, cases: [{when: '${ state.again }', next: gather}], default: done}",
    ),
    "end_in_branch": (
        "An end node inside a parallel branch; branches continue at the join.",
        "End the run after the join.",
        "branches lead to `compose`; `compose` leads to `done`",
    ),
    "shared_branch_node": (
        "Two branches of one parallel share a node; a node belongs to one branch.",
        "Give each branch its own nodes.",
        "branches: [weather, news]   # weather and news reach compose separately",
    ),
    "into_branch": (
        "A node outside a parallel routes into the middle of one of its branches.",
        "Enter a branch only through its parallel node.",
        "next: gather   # not next: forecast (a branch of gather)",
    ),
    "into_join": (
        "A node other than the branches routes to a parallel's join.",
        "Only the branches continue at the join; route elsewhere or through the parallel.",
        "before: {next: gather}   # not next: compose (gather's join)",
    ),
    "conflicting_writes": (
        "Two branches of a parallel write the same state field whose reducer is replace.",
        "Set the field's reduce to append, merge or sum, or write different fields.",
        "state: {sections: {reduce: append}}",
    ),
    # -- children and the artifact store ------------------------------------------------
    "child_missing": (
        "A child artifact (name@version) is not saved in this session, or was deleted.",
        "Save the child first, then the artifact that runs it.",
        "artifact_save {document: <the child>} before the parent",
    ),
    "child_cycle": (
        "An artifact runs itself through its children.",
        "Break the cycle; a child cannot run its parent.",
        "parent -> child only, never child -> parent",
    ),
    "child_too_deep": (
        "Children nest more than 8 levels.",
        "Flatten the tree: inline a level into its parent.",
        "a -> b -> c rather than nine levels",
    ),
    "closure_too_large": (
        "More than 64 distinct artifacts with every child's children.",
        "Use fewer, larger children.",
        "merge small children into one",
    ),
    "artifact_conflict": (
        "That name@version is already saved with other content (or was deleted); artifacts are "
        "immutable.",
        "Save the change under a new version.",
        "draft_publish {draft: hello, revision: 4, version: '1.0.1'}",
    ),
    "artifact_missing": (
        "No saved artifact with that name and version in this session (or a deployment names one).",
        "Save it first, or correct the name and version (artifact_list shows them).",
        "artifact_list",
    ),
    "artifact_in_use": (
        "Deleting an artifact version that a parent artifact pins as a child, or that a "
        "revision of a deployment runs (any revision: a rollback can make it live again). "
        "The message names each referrer.",
        "Delete the parent artifact or the deployment first (a deployment goes once no "
        "unfinished run uses it), then the artifact.",
        "deployment_delete {name: clock_dep}\nartifact_delete {name: clock, version: '1'}",
    ),
    "artifact_corrupt": (
        "Stored artifact data failed verification (digest, size or decoding).",
        "Restore the database from a backup; the operator's log names the key.",
        "flowledger artifact show NAME VERSION   # reports which record",
    ),
    # -- deployments and source documents -----------------------------------------------
    "bad_binding": (
        "A deployment binding or source document has not exactly one of stdio, http or source.",
        "Give exactly one.",
        "sources: {clock: {source: clock}}",
    ),
    "bad_source": (
        "A stdio or http spec is not usable (empty command, bad URL, ...).",
        "Fix the field the message names.",
        "stdio: {command: mcp-server-time, args: [--local-timezone, Etc/UTC]}",
    ),
    "duplicate_tool": (
        "A binding's allow_tools lists a tool twice.",
        "List it once.",
        "allow_tools: [get_current_time]",
    ),
    "secret_undeclared": (
        "A source uses {secret: NAME} that `secrets` does not declare.",
        "Declare the secret under `secrets`.",
        "secrets: {api_key: {env: WEATHER_KEY}}",
    ),
    "secret_reserved": (
        "A secret reads a FLOWLEDGER_* variable; those never resolve as secrets.",
        "Use another environment variable.",
        "secrets: {api_key: {env: WEATHER_KEY}}",
    ),
    "secret_sessions": (
        "A secret is granted to sessions that may not see the source.",
        "List only sessions of the source's `sessions`.",
        "sessions: [S1]\nsecrets: {key: {env: K, sessions: [S1]}}",
    ),
    # -- deployment diagnostics ---------------------------------------------------------
    "deployment_missing": (
        "No such deployment, or no such revision of it, in this session.",
        "Save it (deployment_save, or draft_publish with deploy) or correct the name.",
        "deployment_list",
    ),
    "deployment_in_use": (
        "Deleting a deployment while unfinished runs (pending, running or interrupted) use "
        "it: their definitions are compiled from its revisions. The message names the runs.",
        "Resume them to the end or cancel them (workflow_run_cancel), then delete it.",
        "workflow_run_cancel {run_id: RUN}\ndeployment_delete {name: clock_dep}",
    ),
    "deployment_conflict": (
        "The deployment's live revision is not the one the call expected: someone saved or "
        "rolled back since you read it (compare-and-swap); nothing moved.",
        "Read the live revision again (deployment_show) and decide again.",
        "deployment_show {name: clock_dep}\ndeployment_rollback {name: clock_dep, live: 3}",
    ),
    "deployment_corrupt": (
        "A stored deployment record failed verification (digest, size or decoding).",
        "Restore the database from a backup; `flowledger check` names the damaged keys.",
        "flowledger check --db sqlite:///flowledger.db",
    ),
    "binding_missing": (
        "A dependency of the artifact has no source in the deployment (or, publishing a draft, "
        "no registered source).",
        "Bind it to a registered source.",
        "draft_publish {..., deploy: true, bindings: {clock: clock}}",
    ),
    "credential_missing": (
        "A secret's environment variable is not set in the executing process, or the secret is "
        "not granted to this session.",
        "Set the variable where runs execute, or ask the operator to grant the secret.",
        "WEATHER_KEY=... flowledger worker",
    ),
    "source_unreachable": (
        "The source did not start, answer or list its tools in time (a Python source: its "
        "module could not be imported).",
        "Check the command or URL works, or that the module imports in the process that runs "
        "the workflow; ask the operator to probe it.",
        "flowledger source probe clock",
    ),
    "python_signature_unsupported": (
        "A function of a Python source cannot be a tool: it takes *args, **kwargs or "
        "positional-only parameters, or a type hint has no JSON Schema.",
        "Give the function named parameters with JSON-describable type hints, or leave it out "
        "of the source's python.functions.",
        "def lookup(city: str, days: int = 1) -> dict[str, float]: ...",
    ),
    "openapi_extra_missing": (
        "An OpenAPI source was probed, checked or called by a flowledger installed without "
        "its openapi extra (the document validator).",
        "Install the extra where the source is used: pip install 'flowledger[openapi]'.",
        "pip install 'flowledger[openapi]' && flowledger source probe items",
    ),
    "openapi_document_invalid": (
        "The document of an OpenAPI source does not parse, is not OpenAPI 3.0 or 3.1, or "
        "the validator refuses it (its message says where).",
        "Fix the document (or point the source at a valid one); nothing of the source is "
        "listed until then.",
        "flowledger source probe items",
    ),
    "openapi_operation_unsupported": (
        "An operation of an OpenAPI source cannot be a tool: a required cookie parameter, a "
        "parameter described by content, an unsupported style, two parameters of one name, "
        "a request body without JSON, or a reference outside the document.",
        "Change the operation, or leave it out of the source's openapi.operations.",
        "openapi: {document: /srv/items.json, base_url: http://items:8080, operations: "
        "[listItems]}",
    ),
    "builtin_unknown": (
        "A builtin source's functions names a function the standard library does not have.",
        'Name functions of the library (docs/sources.md, "Built-in transforms").',
        "builtin: {functions: [pick, rename, template]}",
    ),
    "annotation_unknown": (
        "python.read_only or python.idempotent names a function that python.functions leaves out.",
        "List the function in python.functions too, or remove the annotation.",
        "python: {module: billing, functions: [quote], read_only: [quote]}",
    ),
    "tool_missing": (
        "The source does not list a tool the artifact calls.",
        "Use a tool the source lists, or bind a source that has it.",
        "source_probe {source: clock}   # lists its tools",
    ),
    "tool_not_allowed": (
        "allow_tools (of the deployment or the registered source) leaves out a tool the artifact "
        "calls.",
        "Allow the tool, or stop calling it.",
        "sources: {clock: {source: clock, allow_tools: [get_current_time]}}",
    ),
    "arguments_incompatible": (
        "A call site's literal arguments cannot validate against the tool's input schema.",
        "Change the arguments to match the schema source_probe shows.",
        "arguments: {timezone: 'Europe/Paris'}",
    ),
    "schema_drift": (
        "A pinned tool's contract (name, input or output schema) changed since the run started.",
        "Resume only under a drift policy that allows it, or start a new run on the new contract.",
        "deployment drift: compatible",
    ),
    "description_changed": (
        "Only a pinned tool's descriptions or annotations changed (a warning).",
        "Nothing blocks; review the change if descriptions matter to you.",
        "validate_run {run_id: ...}",
    ),
    "server_changed": (
        "The source reports another server name or version than when the run started (a warning).",
        "Nothing blocks; check the server upgrade is expected.",
        "inspect_run {run_id: ...}",
    ),
    "pin_missing": (
        "The run has no pinned environment: it was not started by run_deployment.",
        "Start deployed runs with run_deployment.",
        "run_deployment {deployment: hello, input: {}}",
    ),
    "source_missing": (
        "A registered source the deployment, pin or capability names is not registered, or not "
        "visible to this session.",
        "Use a source the session sees (the operator registers and shares sources).",
        "flowledger source list",
    ),
    "source_disabled": (
        "The operator disabled that registered source.",
        "Ask the operator to enable it.",
        "flowledger source enable clock",
    ),
    "invalid_rate_limit": (
        "A source's call rate limit cannot be set: the source is not registered, or the "
        "number of calls or the interval is out of range.",
        "Name a registered source, 1 to 10,000 calls and an interval up to a day.",
        "flowledger limits set --source clock --calls 60 --per 1m",
    ),
    "inline_source_refused": (
        "A tenant named a command line or URL; only the operator may use inline sources.",
        "Bind a registered source by name.",
        "sources: {clock: {source: clock}}",
    ),
    "checked_against_probe": (
        "A read-only server compared the pin with the registry's last probe instead of "
        "contacting the source (a warning).",
        "Nothing to fix; a server that executes checks the source itself.",
        "flowledger source probe clock   # refreshes the probe",
    ),
    "not_revalidated": (
        "A read-only server could not check the source at all (a warning).",
        "Check from a server that executes, or have the operator probe the source.",
        "flowledger source probe clock",
    ),
    "graph_changed": (
        "The definition's graph no longer matches the run's checkpoint; the resume is blocked.",
        "Resume with the definition version the run started with.",
        "workflow_run_get {run_id: ...}   # shows the version",
    ),
    "definition_missing": (
        "No definition of the run's name and version is registered in this process, so "
        "the paused run cannot be resumed here (a blocked readiness, not a failure).",
        "Serve the application that registers it (for the CLI and MCP server: --app "
        "module:catalog), or, for a deployed run, keep its deployment revision saved.",
        "workflow_definition_list {}   # what this server has registered",
    ),
    # -- sources and tool calls ---------------------------------------------------------
    "source_error": (
        "A source failed in a way no narrower code describes.",
        "Read the message; probe the source.",
        "source_probe {source: clock}",
    ),
    "source_invalid": (
        "A source spec is not valid (command, URL, headers).",
        "Fix the field the message names.",
        "http: {url: 'https://mcp.example.com/mcp'}",
    ),
    "source_protocol": (
        "The source answered something that is not valid MCP.",
        "Check it is an MCP server of a supported protocol version.",
        "flowledger source probe clock",
    ),
    "source_closed": (
        "The session with the source was already closed when used.",
        "Retry; a new session is opened per run.",
        "resume_run {run_id: ...}",
    ),
    "connection_lost": (
        "The connection to the source dropped during a call.",
        "Retry if the tool is idempotent; check the source's health.",
        "inspect_run {run_id: ...}",
    ),
    "tool_error": (
        "The tool answered with an error result (isError), so the node failed.",
        "Read the tool's message; fix the arguments or the source's state.",
        "read_run_trace {run_id: ...}",
    ),
    "tool_arguments_invalid": (
        "The arguments do not validate against the tool's input schema.",
        "Give the arguments the tool's input schema asks for.",
        "arguments: {timezone: '${ input.timezone }'}",
    ),
    "tool_failed": (
        "The call failed in the source (an exception, a JSON-RPC error after it started).",
        "Read the message; retry only idempotent tools.",
        "read_run_trace {run_id: ...}",
    ),
    "tool_timeout": (
        "The call took longer than the node's timeout.",
        "Raise the node's timeout, or make the tool faster.",
        "fetch: {kind: tool, ..., timeout: 120}",
    ),
    "tool_rejected": (
        "The source refused the request (JSON-RPC error) before or while running it.",
        "Read the JSON-RPC message; fix the call.",
        "tool: get_current_time   # the exact name the source lists",
    ),
    "tool_result_invalid": (
        "The result does not match the tool's declared output schema.",
        "Report it to the source's maintainer; pin a version that answers correctly.",
        "source_probe {source: clock}   # shows the output schema",
    ),
    "tool_result_too_large": (
        "A tool result is over the size bound a node keeps.",
        "Ask the tool for less (paging, limits).",
        "arguments: {limit: 10}",
    ),
    "tool_outcome_unknown": (
        "A non-idempotent tool may have run before a crash; it is never called twice.",
        "Check the tool's effect by hand, then start a new run.",
        "inspect_run {run_id: ...}",
    ),
    "foreach_items": (
        "A foreach's `items` gave no array, or more elements than the limit (1000 per "
        "visit); no item was run.",
        "Make `items` give an array; split a longer list (a foreach over chunks, each "
        "chunk a child run) or filter it first.",
        "items: '${ input.orders[?status == `open`] }'",
    ),
    "foreach_item_failed": (
        "An item of a foreach with `on_item_error: fail` failed; the message names the "
        "item's index and its error's code.",
        "Fix the item or the body, or choose `on_item_error: skip` (leave failed items "
        "out) or `collect` (keep every item's {ok, result} or {ok: false, error}).",
        "on_item_error: collect",
    ),
    "tool_call_failed": (
        "An attempt's failure recorded before the run's owner stopped is final: its kind "
        "is neither retried nor routed by the node.",
        "Route the kind with on_error (or retry it, where the retry table allows), or "
        "start a new run.",
        "on_error: {next: report, kinds: [tool_error, unavailable]}",
    ),
    "unknown_failure_kind": (
        "retry.on or on_error.kinds names something that is not a failure kind.",
        "Use tool_error, invalid_result, timeout, unavailable or outcome_unknown.",
        "retry: {attempts: 3, on: [unavailable, timeout]}",
    ),
    "wait_time": (
        "A wait node needs exactly one of seconds (a number 0..about 100 years, or one "
        "${ ... } expression) and until (an RFC 3339 time with an offset, or one "
        "expression). A value computed at run time is checked then: a negative number, "
        "a time without an offset or one already past fails the run, naming the field.",
        "Give one of them; write times with an offset (Z or +02:00).",
        "review_later: {kind: wait, seconds: 86400, next: remind}",
    ),
    "interrupt_timeout": (
        "An interrupt node's timeout (seconds, more than 0) and on_timeout (the resume "
        "payload its deadline sends) come together, and on_timeout must match the node's "
        "resume_schema, as a person's resume would.",
        "Add the missing one, or make on_timeout a payload resume_schema accepts.",
        "approve: {kind: interrupt, resume_schema: {...}, timeout: 86400, "
        "on_timeout: {approved: false}, next: decide}",
    ),
    "retry_out_of_range": (
        "retry.attempts is outside 1..10, a backoff number is outside its range (initial "
        "and max 0..600 s, factor 1..10, max at least initial), or retry.on is empty.",
        "Keep attempts at most 10 and the backoff within its bounds; route what remains "
        "with on_error.",
        "retry: {attempts: 3, backoff: {initial: 0.5, factor: 2, max: 10}, on: [unavailable]}",
    ),
    "retry_not_allowed": (
        "A tool node retries timeout, invalid_result or outcome_unknown of a tool that is "
        "not annotated read-only or idempotent: a second call could repeat its effect.",
        "Remove the kind from retry.on and route it with on_error, or declare the tool "
        "idempotent in the deployment if calling it twice is harmless.",
        "sources: {billing: {source: billing, allow_tools: [charge], idempotent: [charge]}}",
    ),
    "idempotent_not_allowed": (
        "A binding declares a tool idempotent that its allow_tools does not list.",
        "Add the tool to allow_tools, or remove it from idempotent.",
        "sources: {api: {source: api, allow_tools: [put_item], idempotent: [put_item]}}",
    ),
    "node_failed": (
        "A node failed while running (its message says why).",
        "Read the trace; fix the artifact or the source and start again.",
        "read_run_trace {run_id: ...}",
    ),
    "schema_mismatch": (
        "A value (a node's output, a run's output) did not match its schema at run time.",
        "Make the output template produce what the schema asks, or change the schema.",
        "output_schema properties {text: {type: [string, 'null']}}",
    ),
    # -- the registry ---------------------------------------------------------------------
    "registry_error": (
        "The source registry failed in a way no narrower code describes.",
        "Read the message.",
        "flowledger source list",
    ),
    "source_exists": (
        "A source of that name is already registered.",
        "Update it at its revision, or choose another name.",
        "flowledger source set clock.yaml",
    ),
    "revision_conflict": (
        "The revision named is not the current one: someone edited first (a draft, a registered "
        "source). Nothing was applied.",
        "Read the current revision and redo the edit on it.",
        "draft_get {draft: hello} then draft_patch {draft: hello, revision: <its revision>, ...}",
    ),
    "source_in_use": (
        "Removing a source an unfinished run is pinned to.",
        "Let the runs finish (or cancel them), or disable the source instead.",
        "flowledger source disable clock",
    ),
    "registry_corrupt": (
        "A registry record failed to decode.",
        "Restore from a backup; the message names the record.",
        "flowledger source show clock",
    ),
    "launch_refused": (
        "This door starts and contacts no source (read-only, or a tenant's probe of an inline "
        "spec).",
        "Ask the operator to probe; use a server that may launch.",
        "flowledger source probe clock",
    ),
    # -- the capability catalog (deploy/registry/catalog.py, calls.py, tools.py) ----------
    "call_refused": (
        "capability_call tries only tools the server annotates read-only, or that the "
        "operator lists in the source's call_tools; nothing was sent.",
        "Use a read-only tool, or ask the operator to add the tool to the source's call_tools.",
        "call_tools: [send_message]   # in the flowledger.source/v1 document",
    ),
    "call_busy": (
        "This session already has the most capability calls in flight at once (4).",
        "Wait for one to finish, then call again; nothing was sent.",
        "capability_audit {}   # 'started' entries without an outcome are in flight",
    ),
    "listing_unavailable": (
        "The source has no tool listing to answer from: never probed successfully, and not "
        "refreshed now (it did not answer, or this server starts no source).",
        "Ask the operator to probe it, or ask again with refresh where the server may.",
        "flowledger source probe clock",
    ),
    "audit_corrupt": (
        "A record of the session's capability_call audit log cannot be read.",
        "Report it to the operator: the database may be damaged.",
        "capability_audit {cursor: '<seq of the record>'}   # the records after it",
    ),
    "cursor_invalid": (
        "The cursor is not one this tool gave for this question (query, source).",
        "Pass the next_cursor of the previous page of the same question, or no cursor.",
        "capability_list {query: 'time', cursor: '<next_cursor of query time>'}",
    ),
    "cursor_stale": (
        "A listing changed (a new revision, a tool added, changed or gone) since the cursor "
        "was made, so its positions no longer hold.",
        "List again without a cursor.",
        "capability_list {query: 'time'}",
    ),
    # -- drafts ---------------------------------------------------------------------------
    "draft_error": (
        "A draft operation failed in a way no narrower code describes.",
        "Read the message.",
        "draft_get {draft: hello}",
    ),
    "draft_missing": (
        "No draft of that name in this session.",
        "Create it, or correct the name (draft_list shows them).",
        "draft_create {name: hello}",
    ),
    "draft_exists": (
        "A draft of that name already exists.",
        "Edit it, delete it first, or choose another name.",
        "draft_delete {draft: hello}",
    ),
    "draft_limit": (
        "The session has as many drafts as allowed (256).",
        "Delete drafts you no longer need.",
        "draft_delete {draft: old_idea}",
    ),
    "draft_unstorable": (
        "The edited document cannot be kept: over 512 KiB, too deep, or not JSON data. Nothing "
        "was applied.",
        "Make a smaller edit; move parts into child artifacts.",
        "draft_patch {..., operations: [{op: remove, path: /nodes/huge}]}",
    ),
    "patch_invalid": (
        "An operation is not RFC 6902: unknown op, a missing path/value/from, a path not "
        "starting with '/'. Nothing was applied.",
        "Write {op, path, value} (add, replace, test), {op, path} (remove) or {op, from, path} "
        "(move, copy).",
        '[{"op": "add", "path": "/nodes/done/output", "value": {"text": "${ state.text }"}}]',
    ),
    "patch_failed": (
        "An operation could not be applied (its path does not exist, an array index out of "
        "range, a move into itself). Nothing was applied.",
        "Check the path against the current document (draft_get); '-' appends to an array.",
        '[{"op": "add", "path": "/dependencies/clock/tools/-", "value": "convert_time"}]',
    ),
    "patch_test_failed": (
        "A `test` operation found another value, so the patch was refused as a whole.",
        "Read the current document and test the value it has.",
        '[{"op": "test", "path": "/start", "value": "fetch"}, {"op": "replace", "path": '
        '"/start", "value": "greet"}]',
    ),
    "edit_invalid": (
        "A focused edit does not fit the document (a node that is not there, an end node with no "
        "next, several end nodes). Nothing was applied.",
        "Name existing nodes, or use draft_patch for the edit.",
        "draft_connect {draft: hello, revision: 3, from: fetch, to: done}",
    ),
    "probe_missing": (
        "The capability's registered source was never probed, or its last probe failed, so its "
        "tools are unknown.",
        "Ask the operator to probe it (source_probe on a stdio server, or the CLI).",
        "flowledger source probe clock",
    ),
    "capability_missing": (
        "The source's last probe lists no tool of that name (a capability asked for, or a tool "
        "a draft's node calls).",
        "Use a tool the probe lists: capability_list {query} finds one, capability_inspect "
        "shows it.",
        "draft_add_tool {..., source: clock, tool: get_current_time}",
    ),
    "draft_invalid": (
        "Publishing a draft that is not a valid artifact (or whose children are missing). "
        "Nothing was saved.",
        "Fix the issues listed (draft_get shows diagnostics), then publish again.",
        "draft_publish {draft: hello, revision: 5, version: '1.0.0'}",
    ),
    "draft_contract": (
        "Publishing a draft that does not pass the checks against the catalog (a dependency "
        "unbound or its source not seen, a tool not listed, arguments the tool does not take, "
        "a result path it does not declare, a contract changed since the draft was checked). "
        "Nothing was saved.",
        "Apply the next actions of the diagnostics draft_validate lists, then publish again.",
        "draft_validate {draft: hello}",
    ),
    "argument_missing": (
        "A tool node does not give an argument the tool's input schema requires.",
        "Add it: the next action is the draft_patch that maps it from a same-named state field "
        "or input property when there is one; else capability_inspect shows the schema.",
        '[{"op": "add", "path": "/nodes/now/arguments/timezone", "value": "${ input.timezone }"}]',
    ),
    "argument_invalid": (
        "A literal argument of a tool node does not validate against the tool's input schema "
        "(a wrong type, a value not in its enum, an argument the tool does not take).",
        "Give a value the schema accepts (capability_inspect shows it), read it from a field "
        "(the next action does when a same-named field exists), or remove an unknown one.",
        '[{"op": "replace", "path": "/nodes/sum/arguments/a", "value": 2}]   # not "two"',
    ),
    "argument_type": (
        "An argument reads a field whose type is known (input_schema, a state field's reducer "
        "and assignments, a tool's output schema) and none of its types is what the tool's "
        "input schema takes.",
        "Read a field of the right type, or convert it (to_string, to_number).",
        "arguments: {timezone: '${ to_string(input.zone_id) }'}",
    ),
    "result_path_unknown": (
        "An assign reads result.structured.<path>, but the tool's output schema declares no "
        "such field: it would always be null.",
        "Read a field the output schema declares (capability_inspect shows it).",
        "assign: {temperature: '${ result.structured.temperature }'}",
    ),
    "contract_changed": (
        "A tool's contract (name, input or output schema) in its source's last probe is not "
        "the one the draft was checked against; publishing refuses instead of deploying "
        "something unchecked.",
        "Read the new contract (capability_inspect); any edit, even an empty draft_patch, "
        "checks the draft against it and records it; then publish.",
        "draft_patch {draft: hello, revision: 7, operations: []}",
    ),
    "draft_corrupt": (
        "A stored draft record failed to decode.",
        "Delete the draft and create it again; the message names the key.",
        "draft_delete {draft: hello}",
    ),
    "code_unknown": (
        "explain was asked about a word that is no code.",
        "Use the `code` field of a diagnostic, or the [code] at the start of a tool error.",
        "explain {code: revision_conflict}",
    ),
}


def explain(code: str) -> dict[str, Any]:
    """``{code, cause, fix, example}`` for ``code``; `UnknownCodeError` for no code."""
    entry = EXPLANATIONS.get(code.strip().lower()) if isinstance(code, str) else None
    if entry is None:
        raise UnknownCodeError(str(code))
    cause, fix, example = entry
    return {"code": code.strip().lower(), "cause": cause, "fix": fix, "example": example}
