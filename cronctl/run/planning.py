"""Planning a run: every task's window read, decided and recorded in one transaction (with
`work`'s decisions made ahead, the quiet windows, moved or first, in a second one, once the due
tasks start)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from contextlib import closing
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TypeAlias

from cronctl.coord.port import ChainEnd, StoreUnavailable
from cronctl.core.due import Plan, Previous, plan
from cronctl.core.model import Schedule, Task, format_duration, format_utc
from cronctl.core.runs import AFTER_TRIGGER, Outcome, RunRow
from cronctl.edge.state.store import Store, StoredState, TaskState, Txn
from cronctl.run.context import RunContext, marked_early, new_run_id, running_fields
from cronctl.run.guards import rehearsal_coordinator


def plan_all(
    store: Store, schedule: Schedule, now: datetime, paused: Mapping[str, object], ctx: RunContext,
    ahead: Ahead | None = None,
) -> tuple[dict[str, Plan], list[RunRow]]:  # fmt: skip
    """One transaction: read each task's window, decide, record the decisions. A decision of
    `ahead` (plan_ahead) is used only for the very task object and stored row it was made
    from, as read here; the quiet windows are then left to advance_quiet if something is due."""
    rows: list[RunRow] = []
    new_rows: list[RunRow] = []
    units = 0  # tasks with an occurrence to run, in the order run_all's workers take them
    early = ahead.take(now) if ahead is not None else None
    with store.transaction() as tx:
        if ahead is None:  # `run`: every window in this one transaction
            sorted_ = Decisions(schedule, {}, split=False)
            states = tx.states()
            for task in schedule.tasks:
                sorted_.add(task, None, *decide(task, states.get(task.name), now), None)
        elif early is not None and early.covers(schedule) and ahead.unchanged(store, tx):
            sorted_ = early  # nothing committed since the snapshot: the rows are as read then
        else:
            stored = tx.stored_states()
            if early is not None and early.covers(schedule) and early.stored == stored:
                sorted_ = early  # every task and stored row as decided from
            else:
                sorted_ = _recheck(tx, schedule, stored, now, early)
        for task, decided in sorted_.active:
            if decided.clock_behind:
                _warn_behind(task, decided, now, ctx)
            if decided.run or decided.missed:
                units = _record(task, decided, paused, ctx, rows, units, new_rows)
        if ctx.dry_run:
            raise DryRunRollback(sorted_.plans, rows)
        tx.add_runs(new_rows)  # one statement for every new row
        tx.put_states(_unpaused_counts(sorted_.changed, sorted_.plans, paused))
        if units and ahead is not None:  # written once the due tasks have started
            ahead.quiet, ahead.fresh = sorted_.quiet, sorted_.fresh
            # Freed then too: letting go of a thousand decisions here would delay the
            # first start after this commit.
            ahead.spent = sorted_
        else:  # every window in this commit
            _write_quiet(tx, sorted_.quiet, sorted_.fresh)
    return sorted_.plans, rows


def _recheck(
    tx: Txn, schedule: Schedule, stored: Mapping[str, StoredState], now: datetime,
    early: Decisions | None,
) -> Decisions:  # fmt: skip
    """The decisions at `now` from the rows as stored: one made ahead where its task object
    and stored row are the same, else made now (only the rows that differ are parsed)."""
    known = early.by_task if early is not None else {}
    sorted_ = Decisions(schedule, stored)
    for task in schedule.tasks:
        row = stored.get(task.name)
        entry = known.get(task.name)
        if entry is not None and entry[0] is task and entry[1] == row:
            sorted_.add(*entry)
        else:
            state = None if row is None else tx.parse_state(row)
            sorted_.add(task, row, *decide(task, state, now), state)
    return sorted_


def _unpaused_counts(
    states: list[TaskState], plans: Mapping[str, Plan], paused: Mapping[str, object]
) -> list[TaskState]:
    """The states to record, a paused task's dropped occurrences left out of its missed count
    (they are recorded `skipped: paused`; `work` decides ahead of the pauses)."""
    out = states
    for index, state in enumerate(states):
        decided = plans.get(state.name)
        if decided is None or not decided.missed_count:
            continue
        if decided.task.paused or state.name in paused:
            if out is states:
                out = list(states)
            out[index] = replace(state, missed_total=state.missed_total - decided.missed_count)
    return out


def _warn_behind(task: Task, decided: Plan, now: datetime, ctx: RunContext) -> None:
    if decided.clock_behind and decided.clock_behind > timedelta(minutes=5):
        ctx.world.warn(
            f"cronctl: warning: task {task.name}: the clock is "
            f"{format_duration(decided.clock_behind)} behind the last occurrence dealt with "
            f"({format_utc(decided.last_occurrence or now)}); nothing runs twice, so it "
            "waits for the clock to catch up"
        )


def _record(
    task: Task, decided: Plan, paused: Mapping[str, object], ctx: RunContext,
    rows: list[RunRow], units: int, new_rows: list[RunRow],
) -> int:  # fmt: skip
    """Add `task`'s run and missed rows to `rows`, and as recorded to `new_rows` (none for a
    dry run); the number of units to run so far, this one counted."""
    stopped = task.paused or task.name in paused
    outcome: Outcome = "skipped: paused" if stopped else "pending"
    # What the misfire policy drops while the task is paused is skipped, not missed: nothing
    # would have run (docs/commands.md, MISSED); see also _unpaused_counts.
    missed = [
        make_row(task, when, outcome if stopped else "missed", ctx) for when in decided.missed
    ]
    runs = [make_row(task, when, outcome, ctx) for when in decided.run]
    rows += missed + runs
    recorded = missed + runs
    if outcome == "pending" and runs:
        if units < ctx.max_parallel and not ctx.dry_run:  # taken at once by a worker
            recorded = [*missed, _first_mark(task, runs[0], ctx), *runs[1:]]
        units += 1
    if not ctx.dry_run:
        new_rows.extend(recorded)
    return units


def _quiet(state: TaskState | None, decided: Plan, new: TaskState | None) -> bool:
    """Whether only the window's minute moves (nothing due or missed, the same schedule,
    count and done flag): a window left at the old minute, advance_quiet's write lost, is
    re-scanned to the same answer."""
    return (
        state is not None
        and new is not None
        and not decided.run
        and not decided.missed
        and new.fingerprint == state.fingerprint
        and new.missed_total == state.missed_total
        and new.done == state.done
    )


def _first_quiet(task: Task, decided: Plan, new: TaskState | None) -> bool:
    """Whether a recurring task seen for the first time has nothing due or missed in its first
    minute: a first window left unwritten makes it first seen again at the next tick (a
    one-shot `at` task, first seen again after its instant, would never run)."""
    return (
        new is not None
        and task.at is None
        and not decided.run
        and not decided.missed
        and new.missed_total == 0
    )


def _write_quiet(
    tx: Txn, quiet: list[tuple[StoredState, datetime]], fresh: list[TaskState]
) -> None:
    """Each stored row moved only if still as read, each first window inserted only where the
    task still has no row: neither overwrites another's write."""
    tx.advance_states(quiet)
    tx.add_states(fresh)


#: How long after the due tasks' starts advance_quiet waits before its write: written at
#: once, its CPU (it grows with the quiet windows) is taken from the commands just started,
#: which on a machine of few CPUs then wait to run.
QUIET_AFTER_S = 0.03


def advance_quiet(store: Store, ahead: Ahead, ctx: RunContext) -> None:
    """Write the quiet windows that plan_all left out, QUIET_AFTER_S after the due tasks have
    started. Never raises: a window not moved is re-scanned at the next minute, a first one
    not written is first seen again (see _first_quiet)."""
    quiet, fresh = ahead.quiet, ahead.fresh
    ahead.quiet, ahead.fresh = [], []
    try:
        if quiet or fresh:
            ctx.world.sleep(QUIET_AFTER_S)
            with store.transaction() as tx:
                _write_quiet(tx, quiet, fresh)
    except Exception as exc:  # anything: see the docstring
        ctx.world.warn(f"cronctl: warning: the quiet tasks' windows were not advanced: {exc}")
    finally:
        ahead.spent = None  # the decisions, let go now that the due tasks have started


def _first_mark(task: Task, row: RunRow, ctx: RunContext) -> RunRow:
    """A pending first-wave row as recorded: already "running" when nothing but the overlap
    lock stands before its start, so its mark costs no commit of its own (a crash before the
    start says "outcome unknown", never "did not run"); not a row that waits for its claim."""
    if not marked_early(task):
        return row
    ctx.run.marked.add(row.id)
    return replace(row, **running_fields(task, row, ctx))


def decide(task: Task, state: TaskState | None, now: datetime) -> tuple[Plan, TaskState | None]:
    """`task`'s plan at `now` from its remembered `state`, and the state to record (None: the
    same as before)."""
    if task.chained and state is not None and state.fingerprint == task.fingerprint:
        # A chained task has no times of its own: its window stays where it was first seen,
        # which is as far back as its catch-up reaches (run/chains.py).
        return Plan(task, last_occurrence=state.last_occurrence), None
    previous = Previous(state.fingerprint, state.last_occurrence, state.done) if state else None
    decided = plan(task, previous, now)
    if decided.last_occurrence is None:
        return decided, None
    missed_total = state.missed_total if state and not decided.restarted else 0
    missed_total += decided.missed_count
    new = TaskState(
        task.name, task.fingerprint, decided.last_occurrence, missed_total, decided.done
    )
    return decided, (None if new == state else new)


#: One task's decision: the task and stored row (None: never seen) it was made from, the plan,
#: the state to record (None: the same as before), the state parsed from the row.
Decision: TypeAlias = "tuple[Task, StoredState | None, Plan, TaskState | None, TaskState | None]"


class Decisions:
    """Every task's decision at one instant, sorted for plan_all: the plans, the tasks with
    something to record, the states to record (`changed`; with `split`, the quiet windows
    apart: see _quiet and _first_quiet), and what each was decided from (`by_task`)."""

    __slots__ = ("active", "by_task", "changed", "complete", "fresh", "plans", "quiet",
                 "schedule", "split", "stored")  # fmt: skip

    def __init__(
        self, schedule: Schedule, stored: Mapping[str, StoredState], split: bool = True
    ) -> None:
        self.split = split
        self.schedule = schedule
        self.stored = stored
        self.plans: dict[str, Plan] = {}
        self.active: list[tuple[Task, Plan]] = []
        self.changed: list[TaskState] = []
        self.quiet: list[tuple[StoredState, datetime]] = []
        self.fresh: list[TaskState] = []
        self.by_task: dict[str, Decision] = {}
        self.complete = True  # every task of `schedule` decided (plan_ahead may stop short)

    def covers(self, schedule: Schedule) -> bool:
        """Whether every task of this very `schedule` was decided (a reload makes new task
        objects): then every decision holds if the rows are still `stored`."""
        return self.complete and schedule is self.schedule

    def add(
        self, task: Task, row: StoredState | None, decided: Plan, new: TaskState | None,
        state: TaskState | None,
    ) -> None:  # fmt: skip
        """`task`'s decision from its stored `row` (`state` parsed from it)."""
        self.plans[task.name] = decided
        self.by_task[task.name] = (task, row, decided, new, state)
        if decided.run or decided.missed or decided.clock_behind:
            self.active.append((task, decided))
        if new is None:
            return
        if not self.split:
            self.changed.append(new)
        elif row is None:
            (self.fresh if _first_quiet(task, decided, new) else self.changed).append(new)
        elif _quiet(state, decided, new):
            self.quiet.append((row, new.last_occurrence))
        else:
            self.changed.append(new)


class Ahead:
    """Decisions worked out before their minute came (`work`'s lead) from a snapshot of the
    stored states; the store it was read from, kept open for the tick; and the quiet windows
    plan_all left for advance_quiet."""

    __slots__ = ("_handed", "_opened", "decisions", "fresh", "now", "quiet", "spent", "store",
                 "version")  # fmt: skip

    def __init__(self, now: datetime, decisions: Decisions | None) -> None:
        """The decisions for `now` (see plan_ahead); None: cut short, every task is decided
        at the boundary."""
        self.now = now
        self.decisions = decisions
        self.quiet: list[tuple[StoredState, datetime]] = []
        self.fresh: list[TaskState] = []
        self.spent: Decisions | None = None  # the decisions plan_all used, until advance_quiet
        self.store: Store | None = None
        self.version: int | None = None
        self._opened: tuple[int, int] | None = None
        self._handed = False

    @property
    def decided(self) -> dict[str, Decision]:
        """Each Decision, by task name."""
        return self.decisions.by_task if self.decisions is not None else {}

    def take(self, now: datetime) -> Decisions | None:
        """The decisions if they are for `now` (else none), handed over once: a tick whose
        tasks run for hours does not keep a thousand of them alive meanwhile."""
        decisions, self.decisions = self.decisions, None
        return decisions if now == self.now else None

    def keep(self, store: Store, version: int, opened: tuple[int, int]) -> None:
        """Keep `store` (on the file `opened`), whose snapshot at data `version` the decisions
        were made from, for the tick: it spares the tick an open and, often, the rows' read."""
        self.store, self.version, self._opened = store, version, opened

    def open_store(self) -> Store | None:
        """The kept store, handed over once (the caller closes it), if it is still on the file
        at its path; else None (closed: the tick opens the file there itself)."""
        store, opened = self.store, self._opened
        if store is None or opened is None or self._handed:
            return None
        self._handed = True
        try:
            still = store.still_at(opened)
        except Exception:  # anything: the tick's own open meets it and says so
            still = False
        if still:
            return store
        self.store = None
        store.close()
        return None

    def close(self) -> None:
        if self.store is not None and not self._handed:
            self._handed = True
            self.store.close()

    def unchanged(self, store: Store, tx: Txn) -> bool:
        """Whether `tx`, on the kept `store`, sees what its snapshot saw (recovery's commits
        touch only run rows)."""
        if self.version is None or store is not self.store:
            return False
        return tx.data_version() == self.version


def plan_ahead(
    schedule: Schedule, stored: Mapping[str, StoredState],
    parse: Callable[[StoredState], TaskState], now: datetime,
    stop: Callable[[], bool] = lambda: False,
) -> Ahead:  # fmt: skip
    """Every task's decision at `now` from the `stored` rows (`parse` reads one), worked out
    before `now` comes (only the rows can differ by then: plan_all compares them); cut short
    once `stop()` says so (asked every 100 tasks)."""
    decisions = Decisions(schedule, stored)
    for i, task in enumerate(schedule.tasks):
        if i % 100 == 0 and stop():
            decisions.complete = False  # so plan_all checks task by task
            break
        row = stored.get(task.name)
        state = None if row is None else parse(row)
        decisions.add(task, row, *decide(task, state, now), state)
    return Ahead(now, decisions)


class DryRunRollback(Exception):
    """Leaves the planning transaction without writing anything (for --dry-run)."""

    def __init__(self, plans: dict[str, Plan], rows: list[RunRow]) -> None:
        super().__init__("dry run")
        self.plans = plans
        self.rows = rows


def _claimed(task: Task, row: RunRow, ctx: RunContext) -> bool:
    """Whether another run claimed the occurrence: among rehearsals, for a rehearsal."""
    if not ctx.rehearsal:
        return ctx.coord.claimed(task.name, row.occurrence)
    with closing(rehearsal_coordinator(ctx)) as apart:
        return apart.claimed(task.name, row.occurrence)


def taken_over(
    store: Store, schedule: Schedule, paused: Mapping[str, object], planned: list[RunRow],
    ctx: RunContext,
) -> list[RunRow]:  # fmt: skip
    """New rows, recorded, for the claims a claimer that is gone left unstarted while their
    run may still start (coord.orphans, read with the pauses), of this machine's unpaused
    on_one_server tasks: each is claimed as the minute's others are, and run here when this
    machine's claim takes it over first (docs/fleets-postgresql.md#claims-are-leases)."""
    if ctx.rehearsal or ctx.dry_run:
        return []
    ours = {t.name: t for t in schedule.tasks if t.on_one_server}
    have = {(row.task, row.occurrence) for row in planned}
    rows = []
    for name, when, left in ctx.coord.orphans():
        task = ours.get(name)
        if task is None or task.paused or name in paused or (name, when) in have:
            continue
        row = make_row(task, when, "pending", ctx)
        # Its claimer's deadline (guards.wait_until); a chained run as its catch-up's would be.
        ctx.run.deadlines[row.id] = ctx.world.clock() + left
        if task.chained:  # the upstream ends its claimer chose, as catch-up would choose them
            try:
                ends = stored_ends(task, when, ctx)
            except (StoreUnavailable, OSError):
                ends = []  # run it, without its upstream's run ids, rather than not at all
            upstream = upstream_ids(task, choose(task, ends, ctx.host))
            row = replace(row, trigger=AFTER_TRIGGER, upstream=upstream)
        rows.append(row)
    if rows:
        with store.transaction() as tx:
            tx.add_runs(rows)
    return rows


#: The upstream ends chosen for one downstream task and occurrence, by upstream task.
Picked = Mapping[str, ChainEnd]


def stored_ends(task: Task, when: datetime, ctx: RunContext) -> list[ChainEnd]:
    """The ends of ``task``'s upstream tasks' occurrence ``when`` that the store holds."""
    return [e for e in ctx.coord.chain_ends(set(task.after), when) if e.occurrence == when]


def choose(task: Task, ends: Iterable[ChainEnd], host: str) -> Picked:
    """The end of each upstream task of ``task`` that counts on ``host``: this host's own; for
    an ``on_one_server`` task, another machine's where this one has none (the last ended)."""
    picked: dict[str, ChainEnd] = {}
    for end in sorted(ends, key=lambda e: (e.host == host, e.ended)):
        if end.task in task.after and (end.host == host or task.on_one_server):
            picked[end.task] = end
    return picked


def upstream_ids(task: Task, picked: Picked) -> str:
    """`CRONCTL_UPSTREAM`: the chosen upstream runs' ids, in `after`'s order."""
    return " ".join(picked[name].run_id for name in task.after if name in picked)


def make_row(task: Task, when: datetime, outcome: Outcome, ctx: RunContext) -> RunRow:
    """A new run row of `task`'s occurrence `when`, owned by this process."""
    return RunRow(
        id=new_run_id(when), task=task.name, occurrence=when, outcome=outcome, host=ctx.host,
        pid=os.getpid(),
    )  # fmt: skip


def dry_outcome(row: RunRow, task: Task, ctx: RunContext) -> RunRow:
    """What would happen, found without running anything or taking any claim or lock."""
    if row.outcome != "pending":
        return row
    try:
        if task.on_one_server and _claimed(task, row, ctx):
            return replace(row, outcome="skipped: another server")
        if task.without_overlapping and ctx.coord.overlap_held(task.name):
            return replace(row, outcome="skipped: still running")
    except StoreUnavailable as exc:
        return replace(row, outcome="error", message=str(exc))
    # Printed as "would run (when/skip not evaluated)": the outcome already says "dry run".
    note = "when/skip not evaluated" if task.when or task.skip else ""
    return replace(row, outcome="would run", message=note)
