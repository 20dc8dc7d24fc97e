"""A session with a Python source: the interface `SourceSession` offers for MCP servers
(``open``, ``list_tools``, ``tool``, ``call_tool``, ``close``, ``server_info``), over
functions of a module imported into this process, so the pool, tool nodes, probes,
the capability catalog and revalidation need nothing of their own for it.

Opening imports the module (in a worker thread, within the connect timeout): a module
that cannot be imported is `SourceUnreachableError`, as a server that does not start
is, so a run pinned to it is blocked with ``source_unreachable``. The module is the one
this process has imported: a file changed on disk is seen by the next process, which is
also the one that would call it, so what is checked is what would run.

The listing is every public function the module defines (or those of the source's
``functions`` that it has: a missing one is ``tool_missing`` when used), in name order,
each described by `python_tool`. It is made on the first listing of a session and kept
for the session's life (a session lasts one segment of a run, one probe or one check).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any, TextIO

from ... import __version__
from .errors import (
    PythonSignatureError,
    SessionClosedError,
    SourceUnreachableError,
    ToolArgumentsError,
    ToolNotFoundError,
    clip,
)
from .python_spec import PythonSource
from .python_tools import PythonTool, distribution_of, python_tool
from .session import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, ServerInfo, ToolResult
from .session_base import SessionBase
from .tool_info import ToolInfo

__all__ = ["PROTOCOL", "PythonSession"]

#: What a Python source reports as its protocol version (it speaks no MCP).
PROTOCOL = "flowledger-python/1"


@functools.lru_cache(maxsize=4096)
def _described(
    label: str, module: str, function: Any, annotations: tuple[tuple[str, Any], ...]
) -> PythonTool:
    """`python_tool`, once per function object (a session lasts one segment of a run, so
    describing every function anew for each would cost a run its schemas at every
    segment; a module imported again has new function objects, described anew)."""
    return python_tool(label, module, function, dict(annotations))


def _import(module: str) -> ModuleType:
    if module not in sys.modules:
        importlib.invalidate_caches()  # a module written since the last import is found
    return importlib.import_module(module)


class PythonSession(SessionBase[PythonSource]):
    """Functions of ``source.module`` as tools (see the module). ``errlog`` is accepted
    for the pool's sake and unused: a function's output goes where this process's does."""

    def __init__(
        self,
        source: PythonSource,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        errlog: TextIO | None = None,
    ) -> None:
        super().__init__(
            source, connect_timeout=connect_timeout, call_timeout=call_timeout, errlog=errlog
        )
        self._module: ModuleType | None = None
        self._tools: dict[str, PythonTool] | None = None

    @property
    def is_open(self) -> bool:
        return self._module is not None and not self._closed

    async def open(self) -> None:
        """Import the module within the connect timeout, or `SourceUnreachableError`."""
        self._opening()
        name = self._source.module
        try:
            module = await asyncio.wait_for(asyncio.to_thread(_import, name), self._connect_timeout)
        except TimeoutError:
            raise SourceUnreachableError(
                self.label, f"importing {name} took longer than {self._connect_timeout:g}s"
            ) from None
        except ModuleNotFoundError as exc:
            missing = exc.name or name
            why = f"module {name} not found" + (
                "" if missing == name else f" (it needs {missing}, which is not installed)"
            )
            raise SourceUnreachableError(self.label, why) from None
        except Exception as exc:  # anything the module raises while it is imported
            text = f"{type(exc).__name__}: {clip(str(exc))}" if str(exc) else type(exc).__name__
            raise SourceUnreachableError(self.label, f"importing {name} failed: {text}") from None
        if self._source.builtin:
            info = ServerInfo("flowledger-std", __version__, None, PROTOCOL)
        else:
            _, version = distribution_of(name)
            info = ServerInfo(name, version, None, PROTOCOL)
        self._module, self._server_info = module, info

    async def close(self) -> None:
        """Forget the module (it stays imported in this process). Idempotent."""
        self._closing()
        self._module = None

    def _require_open(self) -> ModuleType:
        if self._closed or self._module is None:
            raise SessionClosedError(self.label)
        return self._module

    def _listing(self) -> dict[str, PythonTool]:
        module = self._require_open()
        if self._tools is not None:
            return self._tools
        source = self._source
        found: dict[str, Any] = {}
        if source.functions is None:
            for name, value in sorted(vars(module).items()):
                if (
                    not name.startswith("_")
                    and inspect.isfunction(value)
                    and value.__module__ == module.__name__
                ):
                    found[name] = value
        else:
            for name in source.functions:
                value = getattr(module, name, None)
                if value is None:
                    continue  # not listed: tool_missing where it is used
                if not inspect.isfunction(value):
                    raise PythonSignatureError(
                        self.label, name, f"it is a {type(value).__name__}, not a function"
                    )
                found[name] = value
        self._tools = {
            name: _described(
                self.label,
                module.__name__,
                value,
                tuple(sorted(source.annotations_of(name).items())),
            )
            for name, value in found.items()
        }
        return self._tools

    async def list_tools(
        self,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the same interface as SourceSession
    ) -> tuple[ToolInfo, ...]:
        """Every function as a tool, in name order (`PythonSignatureError` for one that
        cannot be a tool)."""
        return tuple(tool.info for tool in self._listing().values())

    async def tool(self, name: str) -> ToolInfo:
        """The listing entry of ``name``, or `ToolNotFoundError`."""
        tools = self._listing()
        found = tools.get(name)
        if found is None:
            raise ToolNotFoundError(self.label, name, tuple(tools))
        return found.info

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - see PythonTool.call
    ) -> ToolResult:
        """Call function ``name`` (`PythonTool.call`) within ``timeout`` seconds
        (default: the session's call timeout)."""
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise ToolArgumentsError(self.label, name, "arguments must be a JSON object")
        tools = self._listing()
        found = tools.get(name)
        if found is None:
            raise ToolNotFoundError(self.label, name, tuple(tools))
        return await found.call(
            self.label, arguments or {}, self._call_timeout if timeout is None else timeout
        )
