"""Dataclass-like records without importing `dataclasses`: the classes `cronctl run` creates.

`cronctl run` starts every minute, and on Python 3.11 `@dataclass` costs 0.3-1.3 ms a class
(it execs generated source for each method) plus ~6 ms to import (`inspect`, `ast`, `dis`,
`tokenize`). `@record` makes the same class: the same `__init__`, `__eq__` and `__hash__`
(the source dataclasses generates, compiled when first used, so a class nothing makes or
compares in a process costs no compile; a frozen record with slots sets each field through
its slot's own setter, which `object.__setattr__` finds by a lookup on the type), `__repr__`,
frozen `__setattr__`/`__delattr__` raising `dataclasses.FrozenInstanceError`, `__slots__`,
pickling, `__match_args__`.

A record stays a dataclass to the `dataclasses` module: `__dataclass_fields__` and
`__dataclass_params__` are built on first use (then `dataclasses` is imported and a shadow
dataclass made from the same annotations and defaults), so `dataclasses.fields`, `replace`,
`asdict`, `astuple` and `is_dataclass` work on records as on dataclasses. Inside cronctl use
this module's `replace`, `field_names` and `field_values`, which need no `dataclasses`.

Supported: `frozen`, `slots`, defaults, `field(default=..., default_factory=...,
compare=...)`, `__post_init__`; no inheritance between records, no `ClassVar`/`InitVar`.
Anything else is refused when the class is made, so it never silently differs.

`cronctl run` never imports `typing` either (~12M instructions, 6% of a quiet run). Each
module `run` imports says `TYPE_CHECKING = False` instead of importing that name: mypy takes
any `if TYPE_CHECKING:` as true (ruff as type-only), so the names a module only annotates
with are imported from `typing` under it. What typing would do at runtime is done without
it: this module's overloads and `dataclass_transform` are declared under `if TYPE_CHECKING:`
alone (mypy joins them to the implementation that follows); a protocol's base is `Protocol`
under `if TYPE_CHECKING:`, `else: Protocol = object` (at runtime a plain class, which
nothing instantiates or asks `isinstance` of); a module-level alias, evaluated when the
module runs, is a string when it names typing (`Outcome: TypeAlias = "Literal[...]"`).
"""

from __future__ import annotations

from _thread import get_ident  # threading itself is ~2M instructions a `run`
from collections.abc import Callable, Iterable, Mapping
from types import MemberDescriptorType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar, dataclass_transform, overload

    _T = TypeVar("_T")

__all__ = ["compile_now", "field", "field_names", "field_values", "record", "replace"]

#: The names a record keeps its fields under (as dataclasses does, under its own names).
_NAMES = "__record_fields__"
_SPECS = "__record_specs__"


class _Missing:
    """No default given (dataclasses.MISSING's role)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<MISSING>"


class _Factory:
    """The parameter default of a field with a factory; `inspect` shows it as `<factory>`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_MISSING: Any = _Missing()
_HAS_FACTORY: Any = _Factory()


class _Spec:
    """One field as written in the class body (`field(...)` or a plain default)."""

    __slots__ = ("annotation", "compare", "default", "factory", "name")

    def __init__(self, default: Any = _MISSING, factory: Any = _MISSING, compare: bool = True):
        self.name = ""
        self.annotation: object = None
        self.default = default
        self.factory = factory
        self.compare = compare


if TYPE_CHECKING:

    @overload
    def field(*, default: _T, compare: bool = ...) -> _T: ...
    @overload
    def field(*, default_factory: Callable[[], _T], compare: bool = ...) -> _T: ...
    @overload
    def field(*, compare: bool = ...) -> Any: ...


def field(*, default: Any = _MISSING, default_factory: Any = _MISSING, compare: bool = True) -> Any:
    """A field with a default factory, or one left out of `==` and `hash` (`compare=False`)."""
    if default is not _MISSING and default_factory is not _MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return _Spec(default, default_factory, compare)


if TYPE_CHECKING:

    @overload
    @dataclass_transform(field_specifiers=(field,))
    def record(cls: type[_T], /) -> type[_T]: ...
    @overload
    def record(*, frozen: bool = False, slots: bool = False) -> Callable[[type[_T]], type[_T]]: ...


def record(
    cls: type[_T] | None = None, /, *, frozen: bool = False, slots: bool = False
) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """Make `cls` a record: what `@dataclass(frozen=..., slots=...)` would make of it."""

    def wrap(cls: type[_T]) -> type[_T]:
        return _make(cls, frozen=frozen, slots=slots)

    return wrap if cls is None else wrap(cls)


def replace(obj: _T, /, **changes: Any) -> _T:
    """A copy of the record `obj` with some fields changed (`dataclasses.replace`)."""
    names = _names_of(type(obj))
    for name in names:
        if name not in changes:
            changes[name] = getattr(obj, name)
    return type(obj)(**changes)


def field_names(cls_or_obj: object) -> tuple[str, ...]:
    """The names of a record's fields, in order."""
    return _names_of(cls_or_obj if isinstance(cls_or_obj, type) else type(cls_or_obj))


def field_values(obj: object) -> tuple[Any, ...]:
    """The field values of a record, in order (shallow, unlike `dataclasses.astuple`)."""
    return tuple(getattr(obj, name) for name in _names_of(type(obj)))


def compile_now(namespaces: Iterable[Mapping[str, object]]) -> int:
    """Compile now every method still to be compiled of the records in `namespaces` (module
    dicts); return how many. For a long-lived process (`work`) to pay at start-up what would
    otherwise delay its first tick's starts (~0.3 ms a method, some on the workers' threads)."""
    count = 0
    for namespace in namespaces:
        for value in list(namespace.values()):
            if not isinstance(value, type) or _NAMES not in value.__dict__:
                continue
            for name, attribute in list(value.__dict__.items()):
                if isinstance(attribute, _Compiled):
                    getattr(value, name)
                    count += 1
    return count


def _names_of(cls: type) -> tuple[str, ...]:
    names = cls.__dict__.get(_NAMES)
    if names is None:
        raise TypeError(f"{cls.__qualname__} is not a record")
    return names  # type: ignore[no-any-return]


# --- making the class ---------------------------------------------------------------------


def _make(cls: type[_T], *, frozen: bool, slots: bool) -> type[_T]:
    specs = _specs(cls)
    names = tuple(spec.name for spec in specs)
    own = cls.__dict__
    if frozen and ("__setattr__" in own or "__delattr__" in own):
        raise TypeError(f"{cls.__name__} defines __setattr__ or __delattr__; it cannot be frozen")
    added: dict[str, Any] = {
        _NAMES: names,
        _SPECS: specs,
        "__dataclass_fields__": _Shadow("__dataclass_fields__", frozen, slots),
        "__dataclass_params__": _Shadow("__dataclass_params__", frozen, slots),
    }
    methods = {"__match_args__": names, "__repr__": _repr_fn(names)}
    added.update((name, value) for name, value in methods.items() if name not in own)
    if not cls.__doc__:
        added["__doc__"] = _doc_text(cls.__name__, specs)
    made = _with_slots(cls, names, added) if slots else _in_place(cls, specs, added)
    post_init = "__post_init__" in own
    attach: dict[str, Any] = {
        "__init__": _Compiled(made, "__init__", lambda: _init_fn(made, specs, frozen, post_init))
    }
    compared = tuple(spec.name for spec in specs if spec.compare)
    if "__eq__" not in own:
        attach["__eq__"] = _Compiled(made, "__eq__", lambda: _eq_fn(made, compared))
    own_hash = own.get("__hash__", _MISSING)
    if own_hash is _MISSING or (own_hash is None and "__eq__" in own):
        # As dataclasses: eq without frozen makes the class unhashable; frozen hashes the fields.
        hashed = _Compiled(made, "__hash__", lambda: _hash_fn(made, compared))
        attach["__hash__"] = hashed if frozen else None
    if frozen:
        attach.update(__setattr__=_frozen_setattr(made), __delattr__=_frozen_delattr(made))
        if slots:
            attach.update(_state_fns(names))
    for name, value in attach.items():
        setattr(made, name, value)
    return made


def _in_place(cls: type[_T], specs: list[_Spec], added: dict[str, Any]) -> type[_T]:
    """As dataclasses: the class itself, a plain default left as its class attribute."""
    for spec in specs:
        if isinstance(cls.__dict__.get(spec.name), _Spec):
            delattr(cls, spec.name)
            if spec.default is not _MISSING:
                setattr(cls, spec.name, spec.default)
    for name, value in added.items():
        setattr(cls, name, value)
    return cls


def _with_slots(cls: type[_T], names: tuple[str, ...], added: dict[str, Any]) -> type[_T]:
    """As dataclasses: a new class with `__slots__`, the defaults kept by `__init__` alone."""
    if "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__} already specifies __slots__")
    body = {k: v for k, v in cls.__dict__.items() if k not in names}
    body.pop("__dict__", None)
    body.pop("__weakref__", None)
    body.update(added, __slots__=names)
    metaclass: Any = type(cls)
    made: type[_T] = metaclass(cls.__name__, cls.__bases__, body)
    made.__qualname__ = cls.__qualname__
    return made


def _specs(cls: type) -> list[_Spec]:
    for base in cls.__mro__[1:-1]:
        if _NAMES in base.__dict__ or "__dataclass_fields__" in base.__dict__:
            raise TypeError(f"{cls.__name__}: a record cannot inherit from a record or dataclass")
    specs: list[_Spec] = []
    seen_default = False
    # Not inspect.get_annotations: inspect costs ~5 ms to import, and these are the same.
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if text.startswith(("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar")):
            raise TypeError(f"{cls.__name__}.{name}: a record has no ClassVar or InitVar fields")
        value = cls.__dict__.get(name, _MISSING)
        spec = value if isinstance(value, _Spec) else _Spec(default=value)
        spec.name, spec.annotation = name, annotation
        if spec.default is not _MISSING and type(spec.default).__hash__ is None:
            raise ValueError(
                f"mutable default {type(spec.default)} for field {name} is not allowed: "
                "use default_factory"
            )
        has_default = spec.default is not _MISSING or spec.factory is not _MISSING
        if seen_default and not has_default:
            raise TypeError(f"non-default argument {name!r} follows default argument")
        seen_default = seen_default or has_default
        specs.append(spec)
    return specs


class _Compiled:
    """A generated method, compiled when first looked up: what no one calls costs no compile.

    Making an instance, `==`, `hash()` (and `inspect.signature`) look the method up on the
    class; this descriptor then compiles it and puts it in its own place on the class.
    """

    def __init__(self, cls: type, name: str, build: Callable[[], Callable[..., Any]]) -> None:
        self.cls, self.name, self.build = cls, name, build

    def __get__(self, obj: object, owner: type) -> Any:
        method = self.cls.__dict__[self.name]
        if method is self:  # (another thread may have put it in place meanwhile)
            method = self.build()
            setattr(self.cls, self.name, method)
        return method.__get__(obj, owner)


def _compile(
    cls: type, name: str, params: list[str], lines: list[str], scope: dict[str, Any]
) -> Callable[..., Any]:
    """The function `name` with these lines, its free names bound from `scope`."""
    body = "\n".join(f"        {line}" for line in lines or ["pass"])
    source = (
        f"def __make__({', '.join(scope)}):\n"
        f"    def {name}({', '.join(params)}):\n{body}\n"
        f"    return {name}\n"
    )
    namespace: dict[str, Any] = {}
    # exec of the text, as dataclasses does, not compile(): the first compile() of a process
    # costs ~0.75 ms more (it sets up the ast module's types). The source has no annotations,
    # so this module's `from __future__ import annotations`, which exec passes on, changes
    # nothing in it.
    exec(source, {"__builtins__": __builtins__}, namespace)  # noqa: S102  (our own source)
    function: Callable[..., Any] = namespace["__make__"](**scope)
    function.__qualname__ = f"{cls.__qualname__}.{name}"
    function.__module__ = cls.__module__
    return function


def _init_fn(cls: type, specs: list[_Spec], frozen: bool, post_init: bool) -> Callable[..., None]:
    """The `__init__` dataclasses would generate: the same parameters, defaults, annotations."""
    scope: dict[str, Any] = {"__set": object.__setattr__, "__factory_marker": _HAS_FACTORY}
    self = "__record_self__" if any(spec.name == "self" for spec in specs) else "self"
    params, lines = [self], []
    for spec in specs:
        name = spec.name
        param = value = name
        setter = "__set"
        slot = cls.__dict__.get(name)
        if frozen and type(slot) is MemberDescriptorType:
            # A slot's own setter: what object.__setattr__ finds after a lookup on the type,
            # at half the cost (a Task's 30 fields: ~4.3 -> ~2.0 µs).
            setter = f"__set_{name}"
            scope[setter] = slot.__set__
        if spec.factory is not _MISSING:
            scope[f"__factory_{name}"] = spec.factory
            param += " = __factory_marker"
            value = f"__factory_{name}() if {name} is __factory_marker else {name}"
        elif spec.default is not _MISSING:
            scope[f"__default_{name}"] = spec.default
            param += f" = __default_{name}"
        params.append(param)
        if not frozen:
            lines.append(f"{self}.{name} = {value}")
        elif setter == "__set":
            lines.append(f"__set({self}, {name!r}, {value})")
        else:
            lines.append(f"{setter}({self}, {value})")
    if post_init:
        lines.append(f"{self}.__post_init__()")
    init = _compile(cls, "__init__", params, lines, scope)
    # Set, not compiled in (a third less to compile): what `name: annotation` would give.
    init.__annotations__ = {spec.name: spec.annotation for spec in specs} | {"return": None}
    return init


def _fields_tuple(owner: str, names: tuple[str, ...]) -> str:
    """`(self.a,self.b,)`: the tuple a dataclass compares and hashes."""
    return f"({''.join(f'{owner}.{name},' for name in names)})"


def _eq_fn(cls: type, names: tuple[str, ...]) -> Callable[[object, object], bool]:
    compare = f"{_fields_tuple('self', names)}=={_fields_tuple('other', names)}"
    lines = [
        "if other.__class__ is self.__class__:",
        f"    return {compare}",
        "return NotImplemented",
    ]
    return _compile(cls, "__eq__", ["self", "other"], lines, {})


def _hash_fn(cls: type, names: tuple[str, ...]) -> Callable[[object], int]:
    return _compile(cls, "__hash__", ["self"], [f"return hash({_fields_tuple('self', names)})"], {})


def _repr_fn(names: tuple[str, ...]) -> Callable[[object], str]:
    running: set[tuple[int, int]] = set()

    def __repr__(self: object) -> str:
        key = (id(self), get_ident())
        if key in running:
            return "..."  # a record that contains itself, as dataclasses shows it
        running.add(key)
        try:
            shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        finally:
            running.discard(key)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _frozen_setattr(cls: type) -> Callable[[object, str, object], None]:
    names = cls.__dict__[_NAMES]

    def __setattr__(self: object, name: str, value: object) -> None:
        if type(self) is cls or name in names:
            from dataclasses import FrozenInstanceError

            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]

    return __setattr__


def _frozen_delattr(cls: type) -> Callable[[object, str], None]:
    names = cls.__dict__[_NAMES]

    def __delattr__(self: object, name: str) -> None:
        if type(self) is cls or name in names:
            from dataclasses import FrozenInstanceError

            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)  # type: ignore[arg-type]

    return __delattr__


def _state_fns(names: tuple[str, ...]) -> dict[str, Callable[..., Any]]:
    """What dataclasses gives a frozen class with slots, so that pickle can set the fields."""

    def __getstate__(self: object) -> list[Any]:
        return [getattr(self, name) for name in names]

    def __setstate__(self: object, state: list[Any]) -> None:
        for name, value in zip(names, state, strict=False):
            object.__setattr__(self, name, value)

    return {"__getstate__": __getstate__, "__setstate__": __setstate__}


def _doc_text(name: str, specs: list[_Spec]) -> str:
    """What dataclasses puts in `__doc__` when there is none: the class's signature."""
    parts = []
    for spec in specs:
        annotation = spec.annotation
        shown = repr(annotation) if isinstance(annotation, str) else _annotation_text(annotation)
        part = f"{spec.name}: {shown}"
        if spec.factory is not _MISSING:
            part += " = <factory>"
        elif spec.default is not _MISSING:
            part += f" = {spec.default!r}"
        parts.append(part)
    return f"{name}({', '.join(parts)})"


def _annotation_text(annotation: object) -> str:
    if isinstance(annotation, type):
        if annotation.__module__ == "builtins":
            return annotation.__qualname__
        return f"{annotation.__module__}.{annotation.__qualname__}"
    return repr(annotation).replace("typing.", "")


# --- what the dataclasses module asks for -------------------------------------------------


class _Shadow:
    """`__dataclass_fields__` / `__dataclass_params__`, built from a shadow dataclass on first use.

    The shadow is `@dataclass` applied to a plain class with the record's annotations and
    defaults, so the Field objects and params are exactly those dataclasses would have made.
    """

    def __init__(self, attribute: str, frozen: bool, slots: bool) -> None:
        self.attribute = attribute
        self.frozen = frozen
        self.slots = slots

    def __get__(self, obj: object, owner: type) -> Any:
        import dataclasses

        made = next(cls for cls in owner.__mro__ if _SPECS in cls.__dict__)
        specs: list[_Spec] = made.__dict__[_SPECS]
        namespace: dict[str, Any] = {
            "__annotations__": {spec.name: spec.annotation for spec in specs},
            "__module__": made.__module__,
            "__qualname__": made.__qualname__,
        }
        for spec in specs:
            kwargs: dict[str, Any] = {"compare": spec.compare}
            if spec.factory is not _MISSING:
                kwargs["default_factory"] = spec.factory
            elif spec.default is not _MISSING:
                kwargs["default"] = spec.default
            namespace[spec.name] = dataclasses.field(**kwargs)
        shadow: type = dataclasses.dataclass(frozen=self.frozen, slots=self.slots)(
            type(made.__name__, (), namespace)
        )
        for attribute in ("__dataclass_fields__", "__dataclass_params__"):
            setattr(made, attribute, getattr(shadow, attribute))
        return getattr(made, self.attribute)
