"""The supervisor: the session-owned runtime that executes and adopts a session's runs."""

from ._core import StartTicket, Supervisor

__all__ = ["StartTicket", "Supervisor"]
