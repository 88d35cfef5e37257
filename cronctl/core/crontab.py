"""Crontab text -> plain dicts for tomli-w, and a report, by cron's own reading rules: a line
cronctl cannot run the way cron ran it is left out and reported (docs/commands.md, import)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from itertools import takewhile
from typing import Any

from cronctl.core import schedules
from cronctl.core.cronexpr import CronExpr, parse_cron
from cronctl.core.model import DEFAULT_SHELL, TASK_NAME
from cronctl.core.slugs import slug
from cronctl.core.values import check_env, check_line, escape_controls
from cronctl.core.zones import parse_zone
from cronctl.errors import CronSyntaxError, ZoneError


@dataclass(frozen=True, slots=True)
class ReportLine:
    """One thing the import has to say; `left_out`: behaviour the file lacks."""

    line: int | None
    message: str
    left_out: bool


@dataclass(frozen=True, slots=True)
class CrontabImport:
    """The converted tasks (file order), the shared [defaults], and the report."""

    tasks: tuple[dict[str, Any], ...]
    defaults: dict[str, Any]
    report: tuple[ReportLine, ...]

    @property
    def left_out(self) -> int:
        return sum(r.left_out for r in self.report)


# `NAME=value`, `NAME = "quoted value"`; a quoted name is allowed, as cron allows it.
_ENV = re.compile(r"""^(?P<name>[A-Za-z_][A-Za-z0-9_]*|"[^"]*"|'[^']*')\s*=\s*(?P<value>.*)$""")
# Variables that only tell cron how to mail or when to start: no schedule-file equivalent.
_CRON_ONLY = {
    "MAILTO": "cron mails what `cronctl run` prints (only failures), so set MAILTO in the "
    "crontab that runs cronctl",
    "MAILFROM": "it sets cron's mail sender; set it in the crontab that runs cronctl",
    **dict.fromkeys(
        ("CONTENT_TYPE", "CONTENT_TRANSFER_ENCODING"),
        "it sets cron's mail format; set it in the crontab that runs cronctl",
    ),
    "RANDOM_DELAY": "cronctl starts tasks at their minute, without a random delay",
}
# Variables that become keys of their own rather than env entries.
_NOT_ENV = {"SHELL", "CRON_TZ", *_CRON_ONLY}

_MONTH_NAMES = "JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC"
_DAY_NAMES = "SUN|MON|TUE|WED|THU|FRI|SAT"
_ATOM = rf"(?:\d+[LW]?|LW|L|W|H|{_MONTH_NAMES}|{_DAY_NAMES})(?:#\d+)?"
_ITEM = rf"(?:\*|\?|{_ATOM}(?:-{_ATOM})?)(?:/\d+)?"
# A token that can only be a time field: used to count seconds and year fields.
_TIME_FIELD = re.compile(rf"^{_ITEM}(?:,{_ITEM})*$", re.IGNORECASE)
#: A user name as the user field of a system crontab holds it (and `import --user` takes it).
USER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*\$?$")

RUNUSER = "/sbin/runuser"  # util-linux's; it needs root, as cron did to switch users

_ALL_WEEKDAYS = frozenset(range(7))
_MON_FRI = frozenset(range(1, 6))
_SAT_SUN = frozenset({0, 6})


def parse_crontab(
    text: str, *, system: bool, run_as: str = "root", skip_other_users: bool = False
) -> CrontabImport:
    """Convert a crontab's text for cronctl running as `run_as`. A system line for another
    user keeps its user (`runuser -u USER --`), or `skip_other_users` leaves it out."""
    builder = _Builder(system, run_as, skip_other_users)
    # Cron splits lines on "\n" only; rstrip drops CRLF's "\r" and trailing blanks.
    for number, raw in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        line = raw.rstrip()
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        if "\x00" in stripped:
            builder.say(
                number,
                "left out: the line holds a NUL character (\\u0000), which no command or "
                "value can hold",
            )
            continue
        env = _ENV.match(stripped)
        if env:
            builder.env_line(number, env.group("name").strip("\"'"), env.group("value"))
        else:
            builder.entry_line(number, stripped)
    return builder.finish()


@dataclass
class _Pending:
    name: str
    description: str
    command: str | list[str]
    schedule: dict[str, Any]
    settings: dict[str, Any]  # flat: "timezone", "shell", "workdir", "env.NAME"


@dataclass
class _Builder:
    system: bool
    run_as: str
    skip_other_users: bool
    env: dict[str, tuple[str, int]] = field(default_factory=dict)
    env_lines: list[tuple[int, str]] = field(default_factory=list)
    last_entry: int = 0
    pending: list[_Pending] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    users: dict[str, list[int]] = field(default_factory=dict)
    report: list[ReportLine] = field(default_factory=list)

    def say(self, line: int | None, message: str) -> None:
        """Report a note, or a line "left out: ..." of the schedule file."""
        self.report.append(ReportLine(line, message, message.startswith("left out: ")))

    def env_line(self, number: int, name: str, raw: str) -> None:
        # Cron's value rules: quotes around the whole value are removed.
        value: str | None = raw
        if raw[:1] in ("'", '"'):
            end = raw.find(raw[0], 1)
            value = None if end == -1 or raw[end + 1 :].strip() else raw[1:end]
        if value is None:
            self.say(
                number,
                f"left out: this line does not parse: the value of {name} opens a quote "
                "it does not close (or has text after it)",
            )
            return
        problem = check_env({name: value})
        if problem is None and name in _ONE_LINE and (bad := check_line(_ONE_LINE[name], value)):
            # The schema's own check of the one-line key the variable would set.
            problem = f"{name} would set {_ONE_LINE[name]}, but {bad}"
        if problem is not None:
            self.say(number, f"left out: {problem}")
            return
        if name in _CRON_ONLY:
            shown = f'{name}=""' if not value else f"{name}={value}"
            self.say(
                number,
                f"left out: {shown} has no equivalent in a schedule file: {_CRON_ONLY[name]}",
            )
            return
        self.env[name] = (value, number)
        self.env_lines.append((number, name))

    def entry_line(self, number: int, line: str) -> None:
        self.last_entry = number
        tokens = list(re.finditer(r"\S+", line))
        fields = 1 if line.startswith("@") else 5
        if fields == 5:
            # How many leading tokens (up to 7) can only be time fields.
            count = len(list(takewhile(lambda t: _TIME_FIELD.match(t.group()), tokens[:7])))
            if count > 5:
                written = " ".join(t.group() for t in tokens[:count])
                what = "a seconds or a year field" if count == 6 else "seconds and year fields"
                self.say(
                    number,
                    f"left out: {written!r} has {count} time fields ({what}); cronctl reads five "
                    "(minute hour day-of-month month day-of-week) and is woken once a minute, so "
                    "it cannot run this schedule",
                )
                return
            if count < len(tokens) and count < 5 and tokens[count].group()[0] in "/.~$":
                self.say(
                    number,
                    f"left out: this line does not parse: it has {count} time fields before "
                    f"the command `{line[tokens[count].start() :]}`; cron needs five "
                    "(minute hour day-of-month month day-of-week)",
                )
                return
        written = " ".join(t.group() for t in tokens[:fields])
        if written.lower() == "@reboot":
            # Cron runs it when its daemon starts; `cronctl work` is that daemon here.
            schedule: dict[str, Any] = {"on_start": True}  # said in add_task, once kept
        else:
            try:
                expr = parse_cron(written)
            except CronSyntaxError as exc:
                what = "this line does not parse: " if exc.code == "cron-syntax" else ""
                self.say(number, f"left out: {what}{exc}")
                return
            schedule = schedule_keys(expr, written)
        user = None
        if self.system:
            if len(tokens) <= fields:
                self.say(number, "left out: the line has no user and no command")
                return
            user = tokens[fields].group()
            fields += 1
            if not USER_NAME.match(user):
                self.say(
                    number,
                    f"left out: the user field {user!r} is not a user name; if this is a user "
                    "crontab (no user field), import it without --system",
                )
                return
        if len(tokens) <= fields:
            self.say(number, "left out: the line has no command")
            return
        self.add_task(number, line, schedule, user, line[tokens[fields].start() :])

    def add_task(
        self, number: int, line: str, schedule: dict[str, Any], user: str | None, raw: str
    ) -> None:
        # Vixie cron: `\%` is a literal '%', a bare '%' ends the command (a backslash escapes
        # the character after it: in `\\%` the second one, and '%' cuts).
        kept = re.match(r"(?:\\.|[^\\%])*\\?", raw, re.DOTALL)
        assert kept is not None  # it matches the empty string
        command = kept.group().replace("\\%", "%")
        if kept.end() < len(raw):
            self.say(
                number,
                "left out: unescaped '%' in the command: cron ends the command there and "
                f"feeds the rest to its stdin, so it ran only `{command.strip()}`; "
                "escape a literal '%' as '\\%' and import again, or write the task by hand",
            )
            return
        settings = self.settings(number)
        if settings is None or (user is not None and not self.keeps_user(number, user)):
            return
        if user is not None:
            self.users.setdefault(user, []).append(number)
        elif command.split()[:1] == ["root"]:
            self.say(
                number,
                "note: the command starts with 'root', a user name: if this is a system "
                "crontab (/etc/crontab, /etc/cron.d/*), import it with --system",
            )
        if schedule.get("on_start"):
            self.say(
                number,
                "note: @reboot became on_start = true: `cronctl work` runs it each time it "
                "starts (a crontab line calling `cronctl run` never does)",
            )
        name = self.unique(slug(command))
        # As cron read it, in one line of printable text (an ESC or a stray CR escaped).
        shown = escape_controls(line)
        description = shown if user is None else f"as user {user}: {shown}"
        run: str | list[str] = command
        if user is not None and user != self.run_as:
            # An array, so no second shell reads the command: the shell cron used runs it,
            # as the user cron ran it as, exactly as written. runuser by its path: a
            # crontab's PATH seldom holds sbin (/sbin is /usr/sbin where /usr is merged).
            shell = settings.get("shell", DEFAULT_SHELL)
            run = [RUNUSER, "-u", user, "--", shell, "-c", command]
        self.pending.append(_Pending(name, description, run, schedule, settings))

    def keeps_user(self, number: int, user: str) -> bool:
        """Whether a line for `user` can be imported so that `user` still runs it."""
        if user == self.run_as:
            return True
        if self.skip_other_users:
            why = "--skip-other-users leaves it out"
        elif self.run_as != "root":
            why = (
                f"{self.run_as!r} cannot switch to another user (runuser needs root); import "
                "with --user root if root will run cronctl, or without --system from that "
                "user's own crontab"
            )
        else:
            return True
        self.say(
            number,
            f"left out: it runs as user {user!r}, and cronctl will run as {self.run_as!r}: {why}",
        )
        return False

    def settings(self, number: int) -> dict[str, Any] | None:
        """The keys the environment lines above `number` amount to (None: left out)."""
        flat: dict[str, Any] = {}
        # CRON_TZ is the schedule's zone where both are set; an empty value unsets it.
        zone_var = next((v for v in ("CRON_TZ", "TZ") if self.env.get(v, ("", 0))[0]), None)
        if zone_var is not None:
            value, where = self.env[zone_var]
            name = value.removeprefix(":")  # POSIX TZ: a leading ':' names a zone file
            try:
                parse_zone(name)
            except ZoneError as exc:
                self.say(
                    number,
                    f"left out: its time zone {zone_var}={value} (line {where}) is not one "
                    f"cronctl can use: {exc}",
                )
                return None
            flat["timezone"] = name
        for var, key in _ONE_LINE.items():
            if self.env.get(var, ("", 0))[0]:
                flat[key] = self.env[var][0]
        for var, (value, _) in self.env.items():
            if var not in _NOT_ENV:
                flat[f"env.{var}"] = value
        return flat

    def unique(self, base: str) -> str:
        name, n = base, 1
        while name in self.names:
            n += 1
            name = f"{base}-{n}"
        self.names.add(name)
        assert re.match(TASK_NAME, name), name
        return name

    def finish(self) -> CrontabImport:
        for number, var in self.env_lines:
            if number > self.last_entry:
                self.say(
                    number,
                    f"note: {var} is set after the last scheduled line, so it applies to "
                    "nothing; left out",
                )
        for user, lines in self.users.items():
            many = len(lines) > 1
            which = f"line{'s' * many} {', '.join(map(str, lines))} ran as user {user!r}"
            if user == self.run_as:
                what = "the user cronctl will run as (--user): unchanged"
            else:
                what = (
                    f"cronctl will run as {self.run_as!r}, so {'their' if many else 'its'} "
                    f"command{'s' * many} now run{'' if many else 's'} through `runuser -u "
                    f"{user} -- SHELL -c COMMAND` and {user} still runs {'them' if many else 'it'}"
                )
            self.say(lines[0], f"note: {which}; {what}")
        if self.last_entry == 0:
            self.say(None, "note: the crontab holds no scheduled lines")
        # [defaults]: each setting every task has (a default would reach a task that lacks
        # it), at its most common value (first on a tie).
        every = [p.settings for p in self.pending]
        common: dict[str, Any] = {}
        for key in every[0] if every else ():
            if all(key in s for s in every):
                values = [s[key] for s in every]
                common[key] = max(values, key=values.count)
        tasks = tuple(
            {
                "name": p.name,
                "description": p.description,
                "command": p.command,
                **p.schedule,
                **_nest({k: v for k, v in p.settings.items() if k not in common or common[k] != v}),
            }
            for p in self.pending
        )
        report = sorted(self.report, key=lambda r: r.line if r.line is not None else 0)
        return CrontabImport(tasks, _nest(common), tuple(report))


#: Variables whose value becomes a key that holds one line of text (cron starts commands
#: in $HOME).
_ONE_LINE = {"SHELL": "shell", "HOME": "workdir"}


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    """{"shell": x, "env.PATH": y} -> {"shell": x, "env": {"PATH": y}}, keys in a fixed order."""
    nested: dict[str, Any] = {k: flat[k] for k in ("timezone", "shell", "workdir") if k in flat}
    env = {k.removeprefix("env."): v for k, v in flat.items() if k.startswith("env.")}
    if env:
        nested["env"] = env
    return nested


def schedule_keys(expr: CronExpr, written: str) -> dict[str, Any]:
    """Friendly keys naming exactly the minutes `expr` names, else {"cron": written}."""
    for candidate in _candidates(expr, written):
        if _same_minutes(expr, candidate):
            return candidate
    return {"cron": written}


def _same_minutes(expr: CronExpr, candidate: dict[str, Any]) -> bool:
    key = next(iter(candidate))
    try:
        text, _ = schedules.to_cron(key, candidate[key], candidate)
        assert text is not None
        # Every field occurrences depend on (fixed_time too), whatever the text says.
        return replace(parse_cron(text), text=expr.text) == expr
    except (schedules.ScheduleProblem, CronSyntaxError):
        return False


def _time_key(expr: CronExpr) -> tuple[str, Any] | None:
    minutes, hours = sorted(expr.minutes), sorted(expr.hours)
    every_hour = len(hours) == 24
    if every_hour and len(minutes) == 60:
        return "every_minute", True
    if every_hour and len(minutes) > 1 and minutes == list(range(0, 60, minutes[1])):
        return "every_minutes", minutes[1]
    if every_hour and len(minutes) == 1:
        return ("hourly", True) if minutes == [0] else ("hourly_at", minutes[0])
    if len(minutes) == 1 and len(hours) == 1:
        if minutes == hours == [0]:
            return "daily", True
        return "daily_at", f"{hours[0]:02d}:{minutes[0]:02d}"
    if minutes == [0] and len(hours) == 2:
        return "twice_daily", hours
    return None


def _candidates(expr: CronExpr, written: str) -> Iterator[dict[str, Any]]:
    """Plausible friendly forms; each is kept only if it names the same minutes."""
    time = _time_key(expr)
    if time is None:
        return
    key, value = time
    dow = written.split()[4] if len(written.split()) == 5 else "*"
    clock = {"daily": "00:00", "daily_at": value}.get(key)
    if clock is not None:
        midnight = key == "daily"
        if expr.weekdays == {0} and midnight:
            yield {"weekly": True}
        elif len(expr.weekdays) == 1:
            yield {"weekly_on": [int(dow) if dow.isdigit() else dow, clock]}
        if expr.days == {1} and midnight:
            yield {"yearly": True} if expr.months == {1} else {"monthly": True}
        elif len(expr.days) == 1:
            yield {"monthly_on": [min(expr.days), clock]}
    if expr.weekdays == _ALL_WEEKDAYS:
        yield {key: value}
    elif expr.weekdays == _MON_FRI:
        yield {key: value, "weekdays": True}
    elif expr.weekdays == _SAT_SUN:
        yield {key: value, "weekends": True}
    elif not expr.weekday_star:
        yield {key: value, "days": dow}
