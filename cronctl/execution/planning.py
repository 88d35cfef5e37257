"""Planning a run: every task's window read, decided and recorded in one transaction."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from cronctl.core.due import Plan, Previous, plan
from cronctl.core.model import Schedule, Task, format_utc
from cronctl.core.record import replace
from cronctl.edge.coord import StoreUnavailable
from cronctl.edge.store import RunRow, Store, TaskState
from cronctl.execution.context import RunContext, coord_of, new_run_id


def plan_all(
    store: Store, schedule: Schedule, now: datetime, paused: Mapping[str, object], ctx: RunContext
) -> tuple[dict[str, Plan], list[RunRow]]:
    """One transaction: read each task's window, decide, record the decisions."""
    plans: dict[str, Plan] = {}
    rows: list[RunRow] = []
    changed: list[TaskState] = []
    with store.transaction() as tx:
        states = tx.states()
        for task in schedule.tasks:
            state = states.get(task.name)
            previous = (
                Previous(state.fingerprint, state.last_occurrence, state.done) if state else None
            )
            decided = plan(task, previous, now)
            plans[task.name] = decided
            if decided.clock_behind and decided.clock_behind > timedelta(minutes=5):
                ctx.warn(
                    f"cronctl: warning: task {task.name}: the clock is "
                    f"{decided.clock_behind} behind the last occurrence dealt with "
                    f"({format_utc(decided.last_occurrence or now)}); nothing runs twice, so it "
                    "waits for the clock to catch up"
                )
            outcome = "skipped: paused" if task.paused or task.name in paused else "pending"
            task_rows = [make_row(task, when, "missed", ctx) for when in decided.missed]
            task_rows += [make_row(task, when, outcome, ctx) for when in decided.run]
            rows.extend(task_rows)
            if ctx.dry_run:
                continue
            for row in task_rows:
                tx.add_run(row)
            if decided.last_occurrence is not None:
                missed_total = state.missed_total if state and not decided.restarted else 0
                new = TaskState(
                    task.name,
                    task.fingerprint,
                    decided.last_occurrence,
                    missed_total + decided.missed_count,
                    decided.done,
                )
                if new != state:
                    changed.append(new)
        if ctx.dry_run:
            raise DryRunRollback(plans, rows)
        tx.put_states(changed)  # one statement for every task's new window
    return plans, rows


class DryRunRollback(Exception):
    """Leaves the planning transaction without writing anything (for --dry-run)."""

    def __init__(self, plans: dict[str, Plan], rows: list[RunRow]) -> None:
        super().__init__("dry run")
        self.plans = plans
        self.rows = rows


def make_row(task: Task, when: datetime, outcome: str, ctx: RunContext) -> RunRow:
    """A new run row of `task`'s occurrence `when`, owned by this process."""
    return RunRow(
        id=new_run_id(when),
        task=task.name,
        occurrence=when,
        outcome=outcome,
        host=ctx.host,
        pid=ctx.pid,
    )


def dry_outcome(row: RunRow, task: Task, ctx: RunContext) -> RunRow:
    """What would happen, found without running anything or taking any claim or lock."""
    if row.outcome != "pending":
        return row
    try:
        if task.on_one_server and coord_of(ctx).claimed(task.name, row.occurrence):
            return replace(row, outcome="skipped: another server")
        if task.without_overlapping and coord_of(ctx).overlap_held(task.name):
            return replace(row, outcome="skipped: still running")
    except StoreUnavailable as exc:
        return replace(row, outcome="error", message=str(exc))
    # Printed as "would run (when/skip not evaluated)": the outcome already says "dry run".
    note = "when/skip not evaluated" if task.when or task.skip else ""
    return replace(row, outcome="would run", message=note)
