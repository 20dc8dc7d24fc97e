"""Integrations: flowledger's storage under other frameworks.

Each integration is a sub-package with an optional extra (``pip install
'flowledger[langgraph]'``). They depend on the layers below them (storage, flow,
workflows); nothing in flowledger imports them.
"""

__all__: list[str] = []
