"""Adoption: bringing a run's record in line with its checkpoints and continuing it.

On activation (and on every `poll` for runs nobody executes) each unfinished run is
adopted from durable state: a pending run with no checkpoint is started, one whose
checkpoint exists is adopted instead (never started twice), a running run is continued
from its last checkpoint, an interrupted run waits for an explicit `resume`, and a failed
run only has its activities reconciled. With the registry's `UnfinishedIndex`, the runs to
adopt are read from it once the session's index is complete (`UnfinishedIndex`: the
first activation lists every run, indexes the ones written before the index, and marks
it), so activation reads the unfinished runs only, however many finished ones there are;
a failed run stays indexed until its activities are published for that reason.

A fork (`records.forks`) is a pending run whose seed was written when it was made:
adoption continues it from that checkpoint, never starts it from its input (and one whose
seed is missing fails, "workflow fork checkpoint missing"). Every such verdict that rests
on checkpoints not being found is confirmed with the store first (`misses`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from .... import flow
from ....observability import metrics
from ...activities.live import LiveActivities
from ...authoring.definition import Definition, WorkflowResult
from ...errors import AdoptionError, NotFoundError, UnknownDefinitionError
from ...records.run import Run, RunStatus
from .admitting import admitted
from .cancel import cancel_locked
from .misses import confirm_checkpoints_missing
from .outcomes import (
    adoption_blocked,
    apply_result,
    checkpoint_read_error,
    fail_definite,
    failed_published,
)
from .publication import reconcile_activities
from .seeding import start_cut_short, start_with_seed
from .traces import segment_span
from .workers import Controller, controller_for, execute, forget_if_idle
from .writes import OwnershipLost, stamp, swap, transition

if TYPE_CHECKING:
    from .owner import Supervisor


async def park(sup: Supervisor, run: Run) -> Run:
    """A running run nobody executes any more: publish its durable activities and
    record its latest checkpoint revision (the status stays running)."""
    definition = sup.catalog.resolve(run.definition_name, run.definition_version)
    run = await reconcile_activities(sup, definition, run)
    try:
        history = await definition.history(run.graph_run_id)
    except flow.CheckpointNotFoundError:
        return run
    if not history or history[-1].revision <= run.checkpoint_revision:
        return run
    latest = history[-1].revision
    return await swap(
        sup,
        run,
        lambda current: replace(
            current,
            checkpoint_revision=max(latest, current.checkpoint_revision),
            updated_at=stamp(sup, current),
        ),
    )


async def reconcile_worker(sup: Supervisor, run_id: str) -> None:
    controller = controller_for(sup, run_id)
    async with controller.lock:
        await reconcile(sup, controller, run_id)


async def resolve(sup: Supervisor, run: Run) -> Definition:
    """The run's definition, through `definition_loader` when the catalog lacks it."""
    name, version = run.definition_name, run.definition_version
    if sup.definition_loader is not None and (name, version) not in sup.catalog:
        await sup.definition_loader(name, version)
    return sup.catalog.resolve(name, version)


async def reconcile(
    sup: Supervisor,
    controller: Controller,
    run_id: str,
    *,
    adopting: Callable[[], None] | None = None,
) -> None:
    """Bring the run's record in line with its checkpoints and continue it if it is
    running; ``adopting`` is called once a pending run with a checkpoint (a fork) has
    been moved to running."""
    try:
        run = await sup.registry.get(sup._session_id, run_id)
    except NotFoundError:
        # Only an index entry names it: an orphan (or a record being written now).
        index = sup.index
        if index is not None:
            await index.remove_orphan(sup._session_id, run_id)
        forget_if_idle(sup, run_id)
        return
    if run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
        index = sup.index
        if index is not None:  # a stale entry: the run became terminal before a crash
            await index.remove(sup._session_id, run_id)
    try:
        definition = await resolve(sup, run)
    except UnknownDefinitionError as exc:
        raise AdoptionError(run.id, "resolve definition", exc) from exc
    if run.cancel_requested and not run.status.terminal:
        await cancel_locked(sup, definition, run, "cancel requested")
        return
    status = run.status
    if status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
        return
    if status is RunStatus.FAILED:
        await failed_published(sup, await reconcile_activities(sup, definition, run))
        return
    try:
        history = await definition.history(run.graph_run_id)
    except flow.CheckpointNotFoundError:
        history = []
    except Exception as exc:
        await checkpoint_read_error(sup, definition, run, "load history", exc)
        return
    if status is RunStatus.PENDING or (not history and start_cut_short(run)):
        if not history and run.forked_from is not None:
            await confirm_checkpoints_missing(sup, run)
            await fail_definite(sup, definition, run, "workflow fork checkpoint missing")
            return
        if not history:
            if status is not RunStatus.PENDING:  # a seed may have been written: look again
                await confirm_checkpoints_missing(sup, run)
            sup._auto_started.add(run.id)
            await start_with_seed(sup, controller, definition, run, None)
            return
        if status is RunStatus.PENDING and not await admitted(sup, run):
            return  # a fork waits for a slot like any start
        try:
            run = await transition(
                sup, run, RunStatus.RUNNING, "workflow adopting", history[-1].revision
            )
        except OwnershipLost:
            return
        if adopting is not None:
            adopting()
    await adopt_with_history(sup, controller, definition, run, history)


async def adopt_with_history(
    sup: Supervisor,
    controller: Controller,
    definition: Definition,
    run: Run,
    history: Sequence[flow.RunRecord],
) -> None:
    if not history:
        await confirm_checkpoints_missing(sup, run)
        await fail_definite(sup, definition, run, "workflow checkpoint missing")
        return
    try:
        result: WorkflowResult | None = await definition.get(run.graph_run_id)
    except Exception as exc:
        await checkpoint_read_error(sup, definition, run, "reconstruct checkpoint", exc)
        return
    assert result is not None
    if run.status is RunStatus.RUNNING and result.run.status is flow.RunStatus.RUNNING:
        with segment_span("adoption", run, definition) as outcome:
            # like a resume: one full check, and the segment it admits, in one span
            async with definition.resuming(run.graph_run_id):
                blocked = await definition.check_resume(run.graph_run_id)
                if blocked:
                    await adoption_blocked(sup, run, blocked[0].message)
                    outcome("blocked")
                    return
                live = LiveActivities(
                    lambda current: reconcile_activities(sup, definition, current), run
                )
                metrics.run_adopted()
                try:
                    try:
                        result = await execute(
                            sup,
                            controller,
                            definition.adopt(
                                run.graph_run_id,
                                hooks=[live.hook, sup._boundary.hook, sup._vertex_guard],
                            ),
                        )
                    finally:
                        run = await live.finish()
                except Exception as exc:
                    await checkpoint_read_error(
                        sup, definition, run, "adopt running checkpoint", exc
                    )
                    return
            if result is None:
                return
            outcome(await apply_result(sup, definition, run, result))
            return
    await apply_result(sup, definition, run, result)
