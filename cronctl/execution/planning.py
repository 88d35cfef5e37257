"""Planning a run: every task's window read, decided and recorded in one transaction."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from cronctl.core.due import Plan, Previous, plan
from cronctl.core.model import Schedule, Task, format_utc
from cronctl.core.record import replace
from cronctl.edge.coord import StoreUnavailable
from cronctl.edge.store import RunRow, Store, TaskState
from cronctl.execution.context import (
    RunContext,
    coord_of,
    new_run_id,
    running_fields,
    starts_at_once,
)


def plan_all(
    store: Store,
    schedule: Schedule,
    now: datetime,
    paused: Mapping[str, object],
    ctx: RunContext,
    ahead: Ahead | None = None,
) -> tuple[dict[str, Plan], list[RunRow]]:
    """One transaction: read each task's window, decide, record the decisions.

    `ahead` holds decisions worked out before `now` came (plan_ahead); each is used only for
    the very task object and state it was worked out from, as read here, under the write lock.
    """
    plans: dict[str, Plan] = {}
    rows: list[RunRow] = []
    changed: list[TaskState] = []
    early = ahead.take(now) if ahead is not None else {}
    units = 0  # tasks with an occurrence to run, in the order run_all's workers take them
    with store.transaction() as tx:
        states = tx.states()
        for task in schedule.tasks:
            state = states.get(task.name)
            known = early.get(task.name)
            if known is not None and known[0] is task and known[1] == state:
                decided, new = known[2], known[3]
            else:
                decided, new = decide(task, state, now)
            plans[task.name] = decided
            if decided.clock_behind and decided.clock_behind > timedelta(minutes=5):
                ctx.warn(
                    f"cronctl: warning: task {task.name}: the clock is "
                    f"{decided.clock_behind} behind the last occurrence dealt with "
                    f"({format_utc(decided.last_occurrence or now)}); nothing runs twice, so it "
                    "waits for the clock to catch up"
                )
            if decided.run or decided.missed:
                outcome = "skipped: paused" if task.paused or task.name in paused else "pending"
                missed = [make_row(task, when, "missed", ctx) for when in decided.missed]
                runs = [make_row(task, when, outcome, ctx) for when in decided.run]
                rows += missed + runs
                recorded = missed + runs
                if outcome == "pending" and runs:
                    if units < ctx.max_parallel and not ctx.dry_run:  # taken at once by a worker
                        recorded = [*missed, _first_mark(task, runs[0], ctx), *runs[1:]]
                    units += 1
                if not ctx.dry_run:
                    for row in recorded:
                        tx.add_run(row)
            if new is not None:
                changed.append(new)
        if ctx.dry_run:
            raise DryRunRollback(plans, rows)
        tx.put_states(changed)  # one statement for every task's new window
    return plans, rows


def _first_mark(task: Task, row: RunRow, ctx: RunContext) -> RunRow:
    """A pending first-wave row as recorded: already "running" when nothing but the overlap
    lock stands before its start (a worker takes it at once), so that its mark is durable
    with the plan and costs no commit of its own; else as it is.

    A crash between this commit and the start says "outcome unknown" (it may have started),
    never "did not run", and never runs it again; a guard that then refuses records its skip.
    An `on_one_server` row waits for its claim, taken after this transaction.
    """
    if task.on_one_server or not starts_at_once(task):
        return row
    ctx.marked.add(row.id)
    return replace(row, **running_fields(task, row, ctx))


def decide(task: Task, state: TaskState | None, now: datetime) -> tuple[Plan, TaskState | None]:
    """`task`'s plan at `now` from its remembered `state`, and the state to record (None: the
    same as before)."""
    previous = Previous(state.fingerprint, state.last_occurrence, state.done) if state else None
    decided = plan(task, previous, now)
    if decided.last_occurrence is None:
        return decided, None
    missed_total = state.missed_total if state and not decided.restarted else 0
    new = TaskState(
        task.name,
        task.fingerprint,
        decided.last_occurrence,
        missed_total + decided.missed_count,
        decided.done,
    )
    return decided, (None if new == state else new)


class Ahead:
    """Decisions worked out before their minute came (`work`, just before the boundary), from
    a snapshot of the states read outside any transaction: by task name, the task object and
    the state each was decided from, the plan and the state to record."""

    __slots__ = ("decided", "now")

    def __init__(
        self,
        now: datetime,
        decided: dict[str, tuple[Task, TaskState | None, Plan, TaskState | None]],
    ) -> None:
        """The decisions for `now` (see plan_ahead)."""
        self.now = now
        self.decided = decided

    def take(
        self, now: datetime
    ) -> dict[str, tuple[Task, TaskState | None, Plan, TaskState | None]]:
        """The decisions if they are for `now` (else none), handed over once: a tick whose
        tasks run for hours does not keep a thousand of them alive meanwhile."""
        decided, self.decided = self.decided, {}
        return decided if now == self.now else {}


def plan_ahead(
    schedule: Schedule,
    states: Mapping[str, TaskState],
    now: datetime,
    stop: Callable[[], bool] = lambda: False,
) -> Ahead:
    """Every task's decision at `now` from `states`, worked out before `now` comes (due.plan is
    pure, so only the states can differ by then; plan_all checks them). It ends early, with
    the tasks decided so far, once `stop()` says so (checked every 100 tasks)."""
    decided: dict[str, tuple[Task, TaskState | None, Plan, TaskState | None]] = {}
    for i, task in enumerate(schedule.tasks):
        if i % 100 == 0 and stop():
            break
        state = states.get(task.name)
        decided[task.name] = (task, state, *decide(task, state, now))
    return Ahead(now, decided)


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
