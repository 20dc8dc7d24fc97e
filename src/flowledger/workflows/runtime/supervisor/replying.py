"""`reply_to_front_doors`: an owner tells the front doors of its session that it answered
one of them (`replies_channel`): a seed is durable, a resume or cancel request was
carried out or refused. The doors re-read what they wait for; without the wake-up they
find it on their next poll, so a failure to announce is only logged."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...records.wakeups import replies_channel

if TYPE_CHECKING:
    from .owner import Supervisor

__all__ = ["reply_to_front_doors"]

log = logging.getLogger(__name__)


async def reply_to_front_doors(sup: Supervisor) -> None:
    if sup.wakeups is None:
        return
    try:
        await sup.wakeups.notify(replies_channel(sup._session_id))
    except Exception as exc:
        log.debug("session %s: waking its front doors failed: %s", sup._session_id, exc)
