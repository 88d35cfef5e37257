"""Chains at run time (docs/chains.md): a followed task records its runs' ends through the
port, the run ending an occurrence's last upstream run starts what follows, and every run
catches up what a crash left between two links, under the follower's misfire policy."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

from cronctl.coord.port import ChainEnd, StoreUnavailable
from cronctl.core.due import CATCH_UP_LIMIT, CLAIM_REACH, CLAIM_SWEEP_AGE
from cronctl.core.minutes import minute_floor
from cronctl.core.model import Schedule, Task, format_utc
from cronctl.core.runs import AFTER_TRIGGER, FAILED, FINISHED, Outcome, RunRow
from cronctl.edge.state.store import Store
from cronctl.run import occurrence
from cronctl.run.context import Follow, RunContext
from cronctl.run.planning import Picked, choose, make_row, stored_ends, upstream_ids
from cronctl.run.recovery import DID_NOT_START

#: An upstream occurrence whose ends are read for a catch-up: as old as a claim is kept.
LOOKBACK = CLAIM_SWEEP_AGE


def ready(task: Task, picked: Picked) -> bool:
    """Whether every upstream task of ``task`` ended as its ``after_outcome`` asks."""
    if any(name not in picked for name in task.after):
        return False
    outcomes = [picked[name].outcome for name in task.after]
    if task.after_outcome == "ok":
        return all(outcome == "ok" for outcome in outcomes)
    if task.after_outcome == "failed":
        return any(outcome in FAILED for outcome in outcomes)
    return True


class RunChains(Follow):
    """One run's chains: followers, the ends seen here, and the downstream occurrences dealt
    with (each once, whichever path comes first)."""

    def __init__(
        self, schedule: Schedule, paused: Mapping[str, object], first_seen: Mapping[str, datetime]
    ) -> None:
        """``first_seen``: each chained task's window start, as far back as it is caught up."""
        self.chained = [task for task in schedule.tasks if task.chained]
        self.followers: dict[str, list[Task]] = {}
        for task in self.chained:
            for name in task.after:
                self.followers.setdefault(name, []).append(task)
        # A task whose only followers run on other machines still records its ends.
        for name in schedule.followed_elsewhere:
            self.followers.setdefault(name, [])
        self._paused = paused
        self._first_seen = first_seen
        self._lock = threading.Lock()
        self._dealt: set[tuple[str, datetime]] = set()
        self._seen: dict[tuple[str, datetime, str], ChainEnd] = {}

    def record(self, task: Task, result: RunRow, ctx: RunContext) -> None:
        """Record durably how a followed task's occurrence ended, before its result is
        committed: a crash between the two leaves an end the next run follows."""
        if task.name not in self.followers or result.outcome not in FINISHED:
            return
        # The run's clock, which the catch-up's misfire window is counted by (`--now` too).
        end = ChainEnd(
            task.name, result.occurrence, result.outcome, result.id, ctx.host, ctx.world.clock()
        )
        with self._lock:
            self._seen[(end.task, end.occurrence, end.host)] = end
        if ctx.rehearsal:  # a pretended future's ends must not be caught up for real
            return
        try:
            ctx.coord.record_end(end)
        except (StoreUnavailable, OSError) as exc:
            ctx.world.warn(
                f"cronctl: error: task {task.name}: could not record its end for the tasks "
                f"that follow it: {exc}; only this run starts them"
            )

    def leads(self, task: Task) -> bool:
        return task.name in self.followers

    def start(self, store: Store, task: Task, result: RunRow, ctx: RunContext) -> list[RunRow]:
        """Run each follower that this recorded end makes ready; the rows of all that ran."""
        with self._lock:
            end = self._seen.get((task.name, result.occurrence, ctx.host))
        if end is None or end.run_id != result.id:
            return []
        rows: list[RunRow] = []
        for follower in self.followers[task.name]:
            picked = self._known(follower, end, ctx)
            if picked is not None and ready(follower, picked):
                rows += self._start(store, follower, end.occurrence, picked, ctx, "pending")
        return rows

    def _known(self, follower: Task, end: ChainEnd, ctx: RunContext) -> Picked | None:
        """``follower``'s upstream ends for ``end``'s occurrence, read from the store only when
        it follows more than one task; None when they cannot be read."""
        with self._lock:
            ends = [e for key, e in self._seen.items() if key[1] == end.occurrence]
        if len(follower.after) > 1 and not ctx.rehearsal:
            try:
                ends += stored_ends(follower, end.occurrence, ctx)
            except (StoreUnavailable, OSError) as exc:
                ctx.world.warn(
                    f"cronctl: error: task {follower.name}: {exc}; the next run looks again"
                )
                return None
        return choose(follower, ends, ctx.host)

    def catch_up(self, store: Store, now: datetime, ctx: RunContext) -> list[RunRow]:
        """Start what a crash between two links (on any machine) left owed here, under each
        follower's misfire policy, counted from when its upstream ended."""
        if not self.chained or ctx.dry_run or ctx.rehearsal:
            return []
        upstream = {name for task in self.chained for name in task.after}
        since = minute_floor(now - LOOKBACK)
        try:
            found = ctx.coord.chain_ends(upstream, since)
        except (StoreUnavailable, OSError) as exc:
            ctx.world.warn(f"cronctl: error: {exc}; chained tasks are not caught up this minute")
            return []
        by_occurrence: dict[datetime, list[ChainEnd]] = {}
        for end in found:
            by_occurrence.setdefault(end.occurrence, []).append(end)
        rows: list[RunRow] = []
        for task in self.chained:
            done = store.occurrences_of(task.name, AFTER_TRIGGER, since, DID_NOT_START)
            owed: list[tuple[datetime, Picked, datetime]] = []
            for when, ends in sorted(by_occurrence.items()):
                picked = choose(task, ends, ctx.host)
                if when in done or not ready(task, picked):
                    continue
                last = max(end.ended for end in picked.values())
                if last >= self._first_seen.get(task.name, now) and now - last <= CLAIM_REACH:
                    owed.append((when, picked, last))
            for when, picked, outcome in _by_policy(task, owed, now):
                rows += self._start(store, task, when, picked, ctx, outcome)
        return rows

    def _start(
        self, store: Store, task: Task, when: datetime, picked: Picked, ctx: RunContext,
        outcome: Outcome,
    ) -> list[RunRow]:  # fmt: skip
        """Run (or record as ``missed``) ``task`` for upstream occurrence ``when``, once."""
        with self._lock:
            if (task.name, when) in self._dealt:
                return []
            self._dealt.add((task.name, when))
        if outcome == "pending" and (task.paused or task.name in self._paused):
            outcome = "skipped: paused"
        row = make_row(task, when, outcome, ctx)
        row = replace(row, trigger=AFTER_TRIGGER, upstream=upstream_ids(task, picked))
        if outcome == "missed":
            last = max(end.ended for end in picked.values())
            why = f"its upstream tasks ended at {format_utc(last)}, past its misfire policy"
            row = replace(row, message=f"{why} ({task.misfire})")
        with store.transaction() as tx:
            if not tx.add_first(row, DID_NOT_START):
                return []  # another process on this machine dealt with it
        if outcome != "pending":
            ctx.run.records.send([row])
            return [row]
        return occurrence.run_task(store, task, [row], ctx)


def _by_policy(
    task: Task, owed: list[tuple[datetime, Picked, datetime]], now: datetime
) -> list[tuple[datetime, Picked, Outcome]]:
    """The misfire policy over the owed occurrences, oldest first, each from when its last
    upstream ended: ``skip`` runs one that ended this minute, ``coalesce`` the latest,
    ``catch-up`` each (at most CATCH_UP_LIMIT), within ``misfire_grace``. The rest: missed."""
    grace = task.misfire_grace
    keep: list[int] = []
    for index, (_, _, last) in enumerate(owed):
        if grace is not None and now - last > grace:
            continue
        if task.misfire == "skip" and minute_floor(last) != minute_floor(now):
            continue
        keep.append(index)
    if task.misfire == "coalesce":
        keep = keep[-1:]
    elif task.misfire == "catch-up":
        keep = keep[-CATCH_UP_LIMIT:]
    kept = set(keep)
    return [
        (when, picked, "pending" if index in kept else "missed")
        for index, (when, picked, _) in enumerate(owed)
    ]
