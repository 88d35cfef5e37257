"""The dashboard's actions (`cronctl serve --allow-actions`, docs/dashboard.md "Actions"):
`cronctl pause`, `resume` and `exec`, with the run context `serve` resolved, each recorded
with who asked and from where. Nothing here knows HTTP. Run now is begun in the request, so
a run going anywhere is refused there and then, and finished in a thread of the server."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from functools import partial
from typing import TypeVar

from cronctl.commands.exec import Begun, begin_exec
from cronctl.commands.operate import pause, resume
from cronctl.coord.port import Coordinator
from cronctl.core.model import Schedule, format_utc
from cronctl.core.values import check_line
from cronctl.edge.safefiles import append_record
from cronctl.errors import CronctlError, UsageError
from cronctl.run.context import RunContext

MAX_REASON = 200  # a sentence, not a document
ACTIONS = ("pause", "resume", "run")
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Actor:
    """Who asked, in the audit record's order: ``user`` "dashboard" (the token is one
    identity), what a reverse proxy on this machine said (``X-Forwarded-User``, the last
    ``X-Forwarded-For``), the connection's address, and ``via`` "page" (a form) or "api"."""

    user: str = "dashboard"
    forwarded_user: str | None = None
    client: str
    forwarded_for: str | None = None
    via: str

    def describe(self) -> str:
        """As the pause keeps it in its `user`: ``dashboard (alice) from 203.0.113.9``."""
        who = f"{self.user} ({self.forwarded_user})" if self.forwarded_user else self.user
        return f"{who} from {self.forwarded_for or self.client}"


class Actions:
    def __init__(self, schedule: Schedule, ctx: RunContext) -> None:
        self.schedule = schedule
        self.ctx = ctx
        self.coord: Coordinator = ctx.coord
        self._names = {t.name for t in schedule.tasks}
        self._runs: dict[threading.Thread, Begun] = {}
        self._runs_lock = threading.Lock()

    def known(self, name: str) -> bool:
        return name in self._names

    def do(
        self, kind: str, name: str, actor: Actor, fields: Mapping[str, str], now: datetime
    ) -> dict[str, bool | str]:
        """One of ACTIONS, recorded; what the API answers. Run now is `cronctl exec NAME` in a
        thread of the server, refused as `cronctl exec` refuses."""
        if kind == "pause":
            reason = fields.get("reason", "").strip()
            if (problem := _reason_problem(reason)) is not None:
                self.record("pause", name, actor, now, f"refused: {problem}", reason[:MAX_REASON])
                raise UsageError(problem)
            paused = partial(pause, self.schedule, self.coord, name, reason, now, actor.describe())
            self._audited("pause", name, actor, now, reason, paused)
            return {"paused": True}
        if kind == "resume":
            resumed = partial(resume, self.schedule, self.coord, name)
            return {"resumed": self._audited("resume", name, actor, now, None, resumed)}
        if self.schedule.errors:
            count = len(self.schedule.errors)
            raise UsageError(
                f"{count} error{'s' * (count != 1)} in the schedule; nothing was run. See "
                "`cronctl check`, fix the schedule and restart the dashboard"
            )
        begin = partial(begin_exec, self.schedule, name, self.ctx, wait=False)
        begun = self._audited("run", name, actor, now, None, begin)
        worker = threading.Thread(target=self._finish, args=(begun,), name=f"exec-{name}")
        with self._runs_lock:
            self._runs[worker] = begun
        worker.start()
        return {"started": True, "run": begun.row.id}

    def refuse(self, kind: str, name: str, actor: Actor, now: datetime, problem: str) -> None:
        """Record an action refused at the door (refused even if the record fails)."""
        with contextlib.suppress(CronctlError):
            self.record(kind, name, actor, now, f"refused: {problem}")

    def _finish(self, begun: Begun) -> None:
        try:
            begun.finish()  # recorded in history, as `cronctl exec` records it
        except CronctlError as exc:
            self.ctx.world.warn(f"cronctl serve: task {begun.task.name}: {exc}")
        finally:
            with self._runs_lock:
                self._runs.pop(threading.current_thread(), None)

    def stop_runs(self, signum: int = signal.SIGTERM) -> None:
        """Pass `signum` on to the runs this server started and wait until each is recorded."""
        with self._runs_lock:
            runs = list(self._runs.items())
        for _worker, begun in runs:
            begun.ctx.tracker.stop(signum)
        for worker, _begun in runs:
            worker.join()

    def _audited(self, action: str, name: str, actor: Actor, now: datetime, reason: str | None,
                 do: Callable[[], _T]) -> _T:  # fmt: skip
        self.record(action, name, actor, now, "accepted", reason)
        try:
            return do()
        except CronctlError as exc:
            self.record(action, name, actor, now, f"failed: {exc}", reason)
            raise

    def record(self, action: str, name: str, actor: Actor, now: datetime, result: str,
               reason: str | None = None) -> None:  # fmt: skip
        """One line of the audit record (edge/safefiles.py)."""
        line = {"at": format_utc(now), "action": action, "task": name, "reason": reason}
        line |= {"result": result, **asdict(actor), "host": self.ctx.host}
        append_record(self.ctx.state_dir, line)


def _reason_problem(reason: str) -> str | None:
    if not reason:
        return "a pause from the dashboard needs a reason: say why, for whoever finds it paused"
    if len(reason) > MAX_REASON:
        return f"the reason is {len(reason)} characters long; keep it to {MAX_REASON}"
    return check_line("reason", reason)
