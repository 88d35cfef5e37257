"""The dashboard's actions (`cronctl serve --allow-actions`): pause, resume and run now,
each recorded with who asked and from where (docs/dashboard.md, "Actions").

Nothing here knows HTTP: cli/serve_actions.py checks the token, the origin and the CSRF
token, and hands over an :class:`Actor`. Run now starts `cronctl exec NAME` as a process of
its own, so the run takes the task's overlap lock exactly as `cronctl exec` does (a second
copy is refused there, whatever this process believes) and outlives the request and the
server."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from cronctl.commands.exec import running_here
from cronctl.commands.operate import pause, reading_store, resume
from cronctl.coord.port import Coordinator
from cronctl.core.model import Schedule, Task, format_utc
from cronctl.core.opskeys import runs_on
from cronctl.core.values import check_line
from cronctl.edge.audit import append_record
from cronctl.edge.state.store import DB_NAME
from cronctl.errors import CronctlError, UsageError

#: The longest pause reason the dashboard takes (a sentence, not a document).
MAX_REASON = 200
ACTIONS = ("pause", "resume", "run")
_T = TypeVar("_T")


class ActionConflict(CronctlError):
    """The action cannot be done now (the task is running already): answered 409."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who asked for an action and from where.

    ``user`` is "dashboard": the token is one identity, shared by whoever holds it.
    ``forwarded_user`` and ``forwarded_for`` are what a reverse proxy on this machine said
    (``X-Forwarded-User``, the last ``X-Forwarded-For`` address); ``client`` is the address
    the connection came from; ``via`` is "page" (a form) or "api" (a bearer request)."""

    user: str
    client: str
    via: str
    forwarded_user: str | None = None
    forwarded_for: str | None = None

    def describe(self) -> str:
        """As the pause keeps it in its `user`: ``dashboard (alice) from 203.0.113.9``."""
        who = f"{self.user} ({self.forwarded_user})" if self.forwarded_user else self.user
        return f"{who} from {self.forwarded_for or self.client}"


class Actions:
    """Pause, resume and run now over one schedule, its state and its coordination.

    ``exec_argv``: how to start `cronctl exec` with the server's schedule files,
    directories and host (the task's name is added); ``exec_env``: its environment (the
    server's, without the dashboard's token)."""

    def __init__(
        self,
        schedule: Schedule,
        state_dir: Path,
        coord: Coordinator,
        host: str,
        exec_argv: Sequence[str],
        exec_env: Mapping[str, str],
    ) -> None:
        self.schedule = schedule
        self.state_dir = state_dir
        self.coord = coord
        self.host = host
        self.exec_argv = tuple(exec_argv)
        self.exec_env = dict(exec_env)
        self._names = {t.name for t in schedule.tasks}
        self._started: dict[str, subprocess.Popen[bytes]] = {}

    def known(self, name: str) -> bool:
        """Whether `name` is a task of the loaded schedule (anything else answers 404)."""
        return name in self._names

    def pause(self, name: str, reason: str, actor: Actor, now: datetime) -> None:
        """Pause `name` as `cronctl pause` does, the actor kept as the pause's user."""
        reason = reason.strip()
        problem = _reason_problem(reason)
        if problem is not None:
            self.record("pause", name, actor, now, f"refused: {problem}", reason[:MAX_REASON])
            raise UsageError(problem)
        self._audited(
            "pause", name, actor, now, reason,
            lambda: pause(self.schedule, self.coord, name, reason, now, actor.describe()),
        )  # fmt: skip

    def resume(self, name: str, actor: Actor, now: datetime) -> bool:
        """Resume `name` as `cronctl resume` does; False if it was not paused."""
        return self._audited(
            "resume", name, actor, now, None, lambda: resume(self.schedule, self.coord, name)
        )

    def run_now(self, name: str, actor: Actor, now: datetime) -> int:
        """Start `cronctl exec NAME`, detached; return its pid.

        :raises ActionConflict: a run of the task is starting or running on this machine.
        :raises UsageError: the task does not run on this machine."""
        task = self.schedule.task(name)
        busy = self._busy(task)
        if busy is not None:
            self.record("run", name, actor, now, f"refused: {busy}")
            raise ActionConflict(f"task {name} {busy}; nothing was started")
        return self._audited("run", name, actor, now, None, lambda: self._start(name))

    def _start(self, name: str) -> int:
        try:
            child = subprocess.Popen(  # our own executable, no shell
                [*self.exec_argv, name],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # the run's log keeps its output
                env=self.exec_env,
                close_fds=True,  # never the listening socket
                start_new_session=True,  # a Ctrl-C or SIGTERM of the server is not the run's
            )
        except OSError as exc:
            raise CronctlError(f"cannot start `cronctl exec {name}`: {exc.strerror}") from exc
        self._started[name] = child
        threading.Thread(target=child.wait, name=f"reap-{child.pid}", daemon=True).start()
        return child.pid

    def _audited(
        self,
        action: str,
        name: str,
        actor: Actor,
        now: datetime,
        reason: str | None,
        do: Callable[[], _T],
    ) -> _T:
        """Record the action, then do it; a failure is recorded too."""
        self.record(action, name, actor, now, "accepted", reason)
        try:
            return do()
        except CronctlError as exc:
            self.record(action, name, actor, now, f"failed: {exc}", reason)
            raise

    def _busy(self, task: Task) -> str | None:
        """Why a run now would be a second copy, or None. `cronctl exec`'s overlap lock
        decides in the end; this only lets the page say so instead of "started"."""
        if not runs_on(task, self.host):
            raise UsageError(
                f"task {task.name!r} runs only on hosts matching {', '.join(task.hosts)}; "
                f"this dashboard runs on {self.host!r}"
            )
        child = self._started.get(task.name)
        if child is not None and child.poll() is None:  # (the reaper sets its returncode)
            return f"is starting or running from this dashboard (pid {child.pid})"
        if not os.path.lexists(self.state_dir / DB_NAME):
            return None
        with reading_store(self.state_dir) as store:
            holder = running_here(store, self.host, task.name)
        return None if holder is None else f"is running ({holder.describe()})"

    def record(
        self,
        action: str,
        name: str,
        actor: Actor,
        now: datetime,
        result: str,
        reason: str | None = None,
    ) -> None:
        """One line of the audit record (edge/audit.py): "accepted" before the action is
        done, "refused: WHY" for one not done, "failed: WHY" after one that failed."""
        append_record(
            self.state_dir,
            {
                "at": format_utc(now),
                "action": action,
                "task": name,
                "reason": reason,
                "result": result,
                "user": actor.user,
                "forwarded_user": actor.forwarded_user,
                "client": actor.client,
                "forwarded_for": actor.forwarded_for,
                "via": actor.via,
                "host": self.host,
            },
        )


def _reason_problem(reason: str) -> str | None:
    if not reason:
        return "a pause from the dashboard needs a reason: say why, for whoever finds it paused"
    if len(reason) > MAX_REASON:
        return f"the reason is {len(reason)} characters long; keep it to {MAX_REASON}"
    return check_line("reason", reason)
