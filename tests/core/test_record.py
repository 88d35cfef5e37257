"""@record makes the class @dataclass would: each behaviour checked against a real dataclass."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cronctl import Problem, Schedule, Settings, Task
from cronctl.core.record import (
    compile_now,
    field,
    field_names,
    field_values,
    record,
    replace,
)
from cronctl.edge.schedfiles import load_paths

# The same class body twice: once a record, once a dataclass (with dataclasses.field).


def _pair(body: Callable[[Callable[..., Any]], dict[str, Any]], **options: bool) -> tuple[Any, Any]:
    made: list[Any] = []
    for decorate, make_field in ((record, field), (dataclasses.dataclass, dataclasses.field)):
        namespace = body(make_field)
        cls = type("Job", (), {"__module__": __name__, "__qualname__": "Job", **namespace})
        made.append(decorate(**options)(cls))
    return made[0], made[1]


def _job_body(make_field: Callable[..., Any]) -> dict[str, Any]:
    return {
        "__doc__": "A job.",
        "__annotations__": {
            "name": "str",
            "tries": "int",
            "delay": "timedelta",
            "tags": "list[str]",
            "note": "str",
        },
        "tries": 1,
        "delay": timedelta(seconds=30),
        "tags": make_field(default_factory=list),
        "note": make_field(default="", compare=False),
    }


def _frozen_body(make_field: Callable[..., Any]) -> dict[str, Any]:
    body = _job_body(make_field)
    body["__annotations__"] = {**body["__annotations__"], "tags": "tuple[str, ...]"}
    body["tags"] = make_field(default_factory=tuple)
    return body


OPTIONS = [{}, {"frozen": True}, {"frozen": True, "slots": True}, {"slots": True}]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_init_signature_doc_and_match_args_are_the_dataclass_ones(options: dict[str, bool]) -> None:
    mine, theirs = _pair(_frozen_body, **options)
    # (The `<factory>` markers are each module's own object, so compare the text.)
    assert str(inspect.signature(mine)) == str(inspect.signature(theirs))
    assert mine.__init__.__annotations__ == theirs.__init__.__annotations__
    assert mine.__init__.__qualname__ == theirs.__init__.__qualname__
    assert mine.__match_args__ == theirs.__match_args__
    assert mine.__doc__ == theirs.__doc__ == "A job."


def test_a_class_without_docstring_gets_the_dataclass_doc() -> None:
    def body(make_field: Callable[..., Any]) -> dict[str, Any]:
        return {k: v for k, v in _frozen_body(make_field).items() if k != "__doc__"}

    mine, theirs = _pair(body, frozen=True)
    assert mine.__doc__ == theirs.__doc__
    assert mine.__doc__ is not None and mine.__doc__.startswith("Job(name: 'str', tries: 'int'")


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_repr_eq_and_defaults_match(options: dict[str, bool]) -> None:
    mine, theirs = _pair(_frozen_body, **options)
    args: dict[str, Any] = {"name": "backup", "tags": ("a",), "note": "x"}
    a, b = mine(**args), theirs(**args)
    assert repr(a) == repr(b)
    assert repr(mine("x")) == repr(theirs("x"))
    assert mine("x") == mine("x", 1, timedelta(seconds=30))
    assert mine("x") != mine("y")
    assert mine("x", note="one") == mine("x", note="two")  # compare=False
    assert (mine("x") == theirs("x")) is False  # another class never equals
    assert mine("x").__eq__(("x",)) is NotImplemented
    assert mine("x").tags == () and mine("x", 2).tries == 2


@pytest.mark.parametrize("count", [0, 1, 2])
def test_eq_and_hash_of_few_fields_match_even_for_nan(count: int) -> None:
    def body(_field: Callable[..., Any]) -> dict[str, Any]:
        return {"__doc__": "Few.", "__annotations__": {f"f{i}": "float" for i in range(count)}}

    mine, theirs = _pair(body, frozen=True)
    nan = float("nan")
    values = [nan] * count
    assert (mine(*values) == mine(*values)) == (theirs(*values) == theirs(*values))
    assert hash(mine(*values)) == hash(theirs(*values))
    assert (mine(*[1.0] * count) == mine(*[2.0] * count)) == (count == 0)


def test_a_default_factory_makes_a_new_value_per_instance() -> None:
    mine, _ = _pair(_job_body)
    first, second = mine("a"), mine("b")
    first.tags.append("t")
    assert second.tags == [] and first.tags == ["t"]


@pytest.mark.parametrize("options", [{"frozen": True}, {"frozen": True, "slots": True}], ids=str)
def test_frozen_records_hash_like_dataclasses_and_refuse_changes(options: dict[str, bool]) -> None:
    mine, theirs = _pair(_frozen_body, **options)
    a, b = mine("x", tags=("t",), note="n"), theirs("x", tags=("t",), note="n")
    assert hash(a) == hash(b) == hash(("x", 1, timedelta(seconds=30), ("t",)))
    assert hash(a) == hash(mine("x", tags=("t",), note="other"))
    for change in (lambda o: setattr(o, "name", "y"), lambda o: delattr(o, "name")):
        with pytest.raises(dataclasses.FrozenInstanceError) as mine_error:
            change(a)
        with pytest.raises(dataclasses.FrozenInstanceError) as their_error:
            change(b)
        assert str(mine_error.value) == str(their_error.value)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'other'"):
        a.other = 1
    assert a.name == "x"


@pytest.mark.parametrize("options", [{}, {"slots": True}], ids=str)
def test_mutable_records_are_unhashable_and_assignable(options: dict[str, bool]) -> None:
    mine, theirs = _pair(_job_body, **options)
    assert mine.__hash__ is None and theirs.__hash__ is None
    job = mine("x")
    with pytest.raises(TypeError, match="unhashable"):
        hash(job)
    job.tries = 5
    assert job == mine("x", 5)


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_slots_are_the_fields_and_class_attributes_the_plain_defaults(
    options: dict[str, bool],
) -> None:
    mine, theirs = _pair(_frozen_body, **options)
    assert getattr(mine, "__slots__", None) == getattr(theirs, "__slots__", None)
    assert hasattr(mine("x"), "__dict__") == hasattr(theirs("x"), "__dict__")
    for name in ("name", "tries", "delay", "tags", "note"):
        assert (name in mine.__dict__) == (name in theirs.__dict__), name
        if not options.get("slots") and name in theirs.__dict__:
            assert getattr(mine, name) == getattr(theirs, name)


def _pickled(cls: type, protocol: int) -> object:
    globals()["Job"] = cls  # pickle finds classes by module and name
    try:
        job = cls("x", 3, tags=("a",), note="n")
        back = pickle.loads(pickle.dumps(job, protocol))  # noqa: S301  (bytes made just above)
        assert back == job and back.note == "n"
        return "equal"
    except TypeError as exc:
        return str(exc)
    finally:
        del globals()["Job"]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_works_where_it_works_for_the_dataclass(
    options: dict[str, bool], protocol: int
) -> None:
    mine, theirs = _pair(_frozen_body, **options)
    assert _pickled(mine, protocol) == _pickled(theirs, protocol)
    if options.get("frozen") or protocol >= 2:
        assert _pickled(mine, protocol) == "equal"


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_copy_gives_equal_records(options: dict[str, bool]) -> None:
    mine, _ = _pair(_frozen_body, **options)
    job = mine("x", 3, tags=("a",), note="n")
    assert copy.copy(job) == job and copy.deepcopy(job) == job
    assert copy.deepcopy(job).note == "n"


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_the_dataclasses_module_sees_a_dataclass(options: dict[str, bool]) -> None:
    mine, theirs = _pair(_frozen_body, **options)
    assert dataclasses.is_dataclass(mine) and dataclasses.is_dataclass(mine("x"))
    assert repr(dataclasses.fields(mine)) == repr(dataclasses.fields(theirs))
    assert repr(mine.__dataclass_params__) == repr(theirs.__dataclass_params__)
    job = mine("x", tags=("a",))
    assert dataclasses.asdict(job) == dataclasses.asdict(theirs("x", tags=("a",)))
    assert dataclasses.astuple(job) == ("x", 1, timedelta(seconds=30), ("a",), "")
    assert dataclasses.replace(job, tries=4) == mine("x", 4, tags=("a",))


def test_a_dataclass_can_subclass_a_frozen_record_only_frozen() -> None:
    mine, _ = _pair(_frozen_body, frozen=True)
    sub = dataclasses.dataclass(frozen=True)(type("Sub", (mine,), {"__annotations__": {}}))
    assert sub("x").name == "x"
    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):
        dataclasses.dataclass(type("Loose", (mine,), {"__annotations__": {}}))


def test_replace_field_names_and_field_values_need_no_dataclasses() -> None:
    mine, _ = _pair(_frozen_body, frozen=True)
    job = mine("x", tags=("a",), note="n")
    assert replace(job, tries=9) == mine("x", 9, tags=("a",))
    assert replace(job, note="m").note == "m" and job.note == "n"
    assert field_names(mine) == field_names(job) == ("name", "tries", "delay", "tags", "note")
    assert field_values(job) == ("x", 1, timedelta(seconds=30), ("a",), "n")
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        replace(job, nope=1)
    with pytest.raises(TypeError, match="is not a record"):
        field_names(object())


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_a_plain_subclass_made_first_gets_the_same_init(options: dict[str, bool]) -> None:
    mine, _ = _pair(_frozen_body, **options)
    sub = type("Sub", (mine,), {})
    job = sub("x", 2)  # the first instance of either: __init__ is compiled now
    assert type(job) is sub and (job.name, job.tries, job.tags) == ("x", 2, ())
    assert mine("x", 2).tries == 2 and "__init__" not in sub.__dict__


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_compile_now_compiles_what_first_use_would_and_nothing_twice(
    options: dict[str, bool],
) -> None:
    mine, theirs = _pair(_frozen_body, **options)
    generated = {"__init__", "__eq__", "__hash__"} & {
        name for name, value in vars(mine).items() if type(value).__name__ == "_Compiled"
    }
    assert "__init__" in generated  # made lazily: nothing compiled yet
    namespace = {"Job": mine, "Other": theirs, "not_a_class": 1, "int": int}
    assert compile_now([namespace]) == len(generated)  # the dataclass and int are left alone
    assert all(type(vars(mine)[name]).__name__ == "function" for name in generated)
    assert compile_now([namespace]) == 0
    job, same = mine("x", 2), theirs("x", 2)  # the compiled methods behave as generated ones
    assert job == mine("x", 2) and field_values(job) == dataclasses.astuple(same)


def test_post_init_runs_after_the_fields_are_set() -> None:
    seen: list[object] = []

    @record(frozen=True, slots=True)
    class Pair:
        """Two numbers."""

        low: int
        high: int = 9

        def __post_init__(self) -> None:
            seen.append((self.low, self.high))

    Pair(1)
    assert seen == [(1, 9)]


def test_own_methods_are_kept() -> None:
    @record(frozen=True)
    class Named:
        """A name compared without case."""

        name: str

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Named) and self.name.lower() == other.name.lower()

        def __hash__(self) -> int:
            return hash(self.name.lower())

        def __repr__(self) -> str:
            return f"<{self.name}>"

    assert Named("A") == Named("a") and hash(Named("A")) == hash(Named("a"))
    assert repr(Named("A")) == "<A>"


def test_a_record_that_contains_itself_repr_does_not_recurse() -> None:
    @record
    class Node:
        """A node."""

        children: list[object] = field(default_factory=list)

    node = Node()
    node.children.append(node)
    assert repr(node).endswith(".<locals>.Node(children=[...])")


@pytest.mark.parametrize(
    ("annotations", "namespace", "error", "message"),
    [
        ({"a": "list[int]"}, {"a": []}, ValueError, "mutable default <class 'list'> for field a"),
        ({"a": "int", "b": "int"}, {"a": 1}, TypeError, "non-default argument 'b' follows default"),
        ({"a": "ClassVar[int]"}, {"a": 1}, TypeError, "no ClassVar or InitVar"),
        ({"a": "int"}, {"__slots__": ("a",)}, TypeError, "already specifies __slots__"),
    ],
)
def test_what_a_dataclass_would_refuse_or_make_differently_is_refused(
    annotations: dict[str, str], namespace: dict[str, object], error: type, message: str
) -> None:
    cls = type("Bad", (), {"__annotations__": annotations, **namespace})
    with pytest.raises(error, match=message.replace("[", r"\[")):
        record(frozen=True, slots=True)(cls)


def test_field_takes_a_default_or_a_factory_not_both() -> None:
    with pytest.raises(ValueError, match="both default and default_factory"):
        field(default=1, default_factory=int)  # type: ignore[call-overload]


def test_a_record_cannot_inherit_from_a_record() -> None:
    mine, _ = _pair(_frozen_body, frozen=True)
    with pytest.raises(TypeError, match="cannot inherit"):
        record(frozen=True)(type("Sub", (mine,), {"__annotations__": {"extra": "int"}}))


def test_frozen_refuses_a_class_with_its_own_setattr() -> None:
    def __setattr__(self: object, name: str, value: object) -> None:
        object.__setattr__(self, name, value)

    cls = type("Own", (), {"__annotations__": {"a": "int"}, "__setattr__": __setattr__})
    with pytest.raises(TypeError, match="cannot be frozen"):
        record(frozen=True)(cls)


# The library's own records: still dataclasses to users of the dataclasses module.


def test_the_public_records_work_with_dataclasses_functions(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[[task]]\nname = "t"\ncommand = "true"\ndaily_at = "03:00"\n')
    schedule = load_paths([path])
    task = schedule.tasks[0]
    for cls in (Task, Schedule, Settings, Problem):
        assert dataclasses.is_dataclass(cls)
    assert "retries" in [f.name for f in dataclasses.fields(Task)]
    moved = dataclasses.replace(task, name="u", retries=2)
    assert (moved.name, moved.retries, moved.cron) == ("u", 2, task.cron)
    assert dataclasses.asdict(Settings())["max_parallel"] == 8
    assert dataclasses.replace(schedule, tasks=()).tasks == ()
    problem = Problem("f", 1, None, "error", "code", "message")
    assert dataclasses.astuple(problem) == ("f", 1, None, "error", "code", "message")
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.name = "v"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(task)) == task  # noqa: S301  (bytes made just above)


def test_a_quiet_run_imports_no_dataclasses(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[[task]]\nname = "t"\ncommand = "true"\ndaily_at = "03:00"\n')
    probe = (
        "import sys\n"
        "from cronctl.cli.main import main\n"
        "sys.argv = ['cronctl', 'run', '-f', sys.argv[1], '--now', '2026-08-03T12:34:00Z',\n"
        "            '--state-dir', sys.argv[2], '--lock-dir', sys.argv[3]]\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print(sorted(m for m in ('dataclasses', 'inspect') if m in sys.modules))\n"
    )
    argv = [sys.executable, "-c", probe, str(path), str(tmp_path / "s"), str(tmp_path / "l")]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
