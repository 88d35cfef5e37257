"""The package's shape, as docs/architecture.md states it, held against the code.

Read from the source with `ast`, nothing imported: imports point down the layers, there is
no import circle, a function imports one of cronctl's own modules only where the page says
why, and neither the code nor the docs cite a document outside the repository. A change
that breaks one of these fails here with the place and the rule, instead of being found
sessions later by someone drawing the import graph.
"""

from __future__ import annotations

import ast
import graphlib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cronctl"

#: docs/architecture.md, "Which layer may import which": each may import its own and those
#: below it. The face's `errors` and `_version` are the floor; `cli` and the dashboard's
#: `web` share the top (no circle between them); `cronctl/__init__.py` and `__main__.py`
#: stand above everything, and nothing inside the package imports them.
LAYERS = ("errors", "_version", "core", "edge", "coord", "run", "commands", "cli")
RANK = {name: rank for rank, name in enumerate(LAYERS)}
RANK["errors"] = RANK["_version"] = 0
RANK["web"] = RANK["cli"]
TOP = ("cronctl", "cronctl.__main__")

#: The function-local imports of cronctl's own modules that docs/architecture.md names, each
#: kept for the reason it gives: (importing module, imported module).
LOCAL_IMPORTS = {
    # a quiet minute never loads the run machinery, nor `run` the typer app
    ("cronctl.cli.main", "cronctl.cli.wiring"),
    ("cronctl.cli.main", "cronctl.cli.app"),
    # the parser only on a cache miss
    ("cronctl.edge.schedentry", "cronctl.edge.schedfiles"),
    # the PostgreSQL adapter (and its driver) only when `coordination` is set
    ("cronctl.coord", "cronctl.coord.postgres.adapter"),
    # resource caps (and `resource`) only for a task that has them
    ("cronctl.edge.process.runner", "cronctl.edge.process.limits"),
    # the dashboard's app, and with it the web extra, only when `serve` starts
    ("cronctl.cli.serve_cmd", "cronctl.web.app"),
}


@dataclass(frozen=True, slots=True)
class Import:
    """One import statement's target among cronctl's modules."""

    source: str  # the importing module
    target: str  # the most specific module it names
    line: int
    in_function: bool
    types_only: bool  # under `if TYPE_CHECKING:`: never executed

    def where(self) -> str:
        return f"{MODULES[self.source].relative_to(ROOT)}:{self.line}"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, names: list[str]) -> list[str]:
    """The modules `from name import names` (or `import name`) loads, most specific first."""
    found = [f"{name}.{n}" for n in names if f"{name}.{n}" in MODULES]
    if len(found) < len(names) or not names:
        # The rest are attributes of `name` itself (a module or a package's __init__).
        while name not in MODULES and "." in name:
            name = name.rpartition(".")[0]
        found.append(name)
    return found


class _Collector(ast.NodeVisitor):
    def __init__(self, source: str) -> None:
        self.source = source
        self.imports: list[Import] = []
        self._functions = 0
        self._types_only = 0

    def _add(self, targets: list[str], line: int) -> None:
        for target in targets:
            if target == "cronctl" or target.startswith("cronctl."):
                self.imports.append(
                    Import(self.source, target, line, self._functions > 0, self._types_only > 0)
                )

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(_resolve(alias.name, []), node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        assert node.level == 0, f"{self.source}:{node.lineno}: a relative import"
        assert node.module is not None
        self._add(_resolve(node.module, [a.name for a in node.names]), node.lineno)

    def _inside_function(self, node: ast.AST) -> None:
        self._functions += 1
        self.generic_visit(node)
        self._functions -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _inside_function

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            self._types_only += 1
            for child in node.body:
                self.visit(child)
            self._types_only -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)


def _imports() -> list[Import]:
    found: list[Import] = []
    for name, path in MODULES.items():
        collector = _Collector(name)
        collector.visit(ast.parse(path.read_text(), str(path)))
        found += collector.imports
    return found


IMPORTS = _imports()


def layer(module: str) -> str | None:
    """The layer a module belongs to; None for the package face above everything."""
    if module in TOP:
        return None
    return module.split(".")[1]


def test_every_module_belongs_to_a_layer() -> None:
    strays = [m for m in MODULES if m not in TOP and layer(m) not in RANK]
    assert not strays, f"modules outside the layers of docs/architecture.md: {strays}"


def test_imports_point_down_the_layers() -> None:
    upward = []
    for imp in IMPORTS:
        if imp.target in TOP:
            upward.append(f"{imp.where()}: imports {imp.target}, the package face")
            continue
        src = layer(imp.source)
        if src is None:
            continue
        dst = layer(imp.target)
        assert dst is not None
        if RANK[dst] > RANK[src]:
            upward.append(f"{imp.where()}: {src} imports {imp.target} ({dst}, a layer above)")
    assert not upward, "imports against docs/architecture.md's layers:\n" + "\n".join(upward)


def test_there_is_no_import_circle() -> None:
    """Counting every import that runs, in a function too: a circle hidden behind a
    function-local import is still a circle (only `if TYPE_CHECKING:` never runs)."""
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in IMPORTS:
        if not imp.types_only:
            edges[imp.source].add(imp.target)
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as circle:
        pytest.fail(f"an import circle: {' -> '.join(circle.args[1])}")


def test_a_function_imports_cronctl_only_where_the_architecture_says_why() -> None:
    local = {(i.source, i.target): i for i in IMPORTS if i.in_function and not i.types_only}
    unlisted = [
        f"{i.where()}: imports {i.target}" for k, i in local.items() if k not in LOCAL_IMPORTS
    ]
    assert not unlisted, (
        "function-local imports of cronctl's own modules that docs/architecture.md does not"
        " name (import at the top, or name it there with its reason):\n" + "\n".join(unlisted)
    )
    gone = sorted(LOCAL_IMPORTS - local.keys())
    assert not gone, f"listed here and in docs/architecture.md but no longer in the code: {gone}"


def test_only_the_coordination_package_knows_its_adapters() -> None:
    """Use cases speak to the port (coord/port.py); `open_coordinator` alone picks the
    adapter, so nothing outside cronctl/coord imports one."""
    adapters = ("cronctl.coord.files", "cronctl.coord.postgres")
    found = [
        f"{i.where()}: imports {i.target}"
        for i in IMPORTS
        if i.target.startswith(adapters) and not i.source.startswith("cronctl.coord")
    ]
    assert not found, "an adapter imported around the port:\n" + "\n".join(found)


def test_no_adapter_method_only_refuses() -> None:
    """An adapter implements what it has: what only a store keeps is a Protocol of its own
    (history.FleetHistory), not methods the files adapter has to refuse one by one."""
    refusing = []
    for path in sorted((PACKAGE / "coord").glob("*/adapter.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                body = [n for n in node.body if not _is_docstring(n)]
                if len(body) == 1 and isinstance(body[0], ast.Raise):
                    refusing.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not refusing, "adapter methods that only raise:\n" + "\n".join(refusing)


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


#: docs/architecture.md, "What each folder holds": each folder's part opens with its name in
#: bold (**`core/`**; the package face's modules under **`cronctl/`**) and runs to the next
#: one, naming each of the folder's modules by its path inside it (`render/tables.py`).
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()
FOLDERS = ARCHITECTURE.partition("### What each folder holds")[2].partition("\n## ")[0]
NAMED_PY = re.compile(r"`([\w./]+\.py)`")


def _folder_parts() -> dict[str, str]:
    openings = list(re.finditer(r"^\*\*`([\w/]+)/`\*\*", FOLDERS, re.MULTILINE))
    ends = [o.start() for o in openings[1:]] + [len(FOLDERS)]
    return {o.group(1): FOLDERS[o.start() : end] for o, end in zip(openings, ends, strict=True)}


def _place(path: Path) -> tuple[str, str]:
    """(folder, name): the part of the page a module belongs in, and how it is named there."""
    parts = path.relative_to(PACKAGE).parts
    if len(parts) == 1:
        return "cronctl", parts[0]
    return parts[0], "/".join(parts[1:])


def _says_nothing(path: Path) -> bool:
    """A package's `__init__.py` that holds at most a docstring: no job to name."""
    body = ast.parse(path.read_text()).body
    return path.name == "__init__.py" and all(
        isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) for node in body
    )


def test_the_architecture_names_every_module_in_its_folders_part() -> None:
    parts = _folder_parts()
    missing = []
    for path in MODULES.values():
        folder, name = _place(path)
        if not _says_nothing(path) and f"`{name}`" not in parts.get(folder, ""):
            missing.append(f"{path.relative_to(ROOT)} (as `{name}` in **`{folder}/`**)")
    assert not missing, (
        "modules docs/architecture.md does not name in their folder's part (\"What each"
        ' folder holds"): say there what each one is for:\n' + "\n".join(missing)
    )


def test_the_architecture_names_no_module_that_is_gone() -> None:
    """Every `.py` the page names is a module: in its folder's part by its path inside
    the folder (or a file of the repository, `tests/...`), elsewhere as `cli/main.py`."""
    parts = _folder_parts()
    gone = []
    for folder, part in parts.items():
        base = PACKAGE if folder == "cronctl" else PACKAGE / folder
        for name in NAMED_PY.findall(part):
            if not (base / name).is_file() and not (ROOT / name).is_file():
                gone.append(f"**`{folder}/`**: `{name}`")
    for name in NAMED_PY.findall(ARCHITECTURE):
        if name.partition("/")[0] in RANK and not (PACKAGE / name).is_file():
            gone.append(f"`{name}`")
    assert not gone, "docs/architecture.md names modules that do not exist:\n" + "\n".join(gone)


#: What the pure core never imports (docs/architecture.md: no files, no processes, never asks
#: the clock); `zoneinfo` reads the zone data, the one reading it does.
WORLDLY = ("subprocess", "sqlite3", "socket", "fcntl", "threading", "signal", "shutil", "tempfile")
CLOCK = re.compile(r"\b(?:datetime\.now|date\.today|datetime\.utcnow|time\.(?:time|monotonic))\(")


def test_the_core_starts_no_process_and_never_asks_the_clock() -> None:
    found = []
    for name, path in MODULES.items():
        if layer(name) != "core":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                named = [node.module or ""]
            else:
                continue
            worldly = [m for m in named if m.partition(".")[0] in WORLDLY]
            found += [f"{name}:{node.lineno}: imports {m}" for m in worldly]
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if CLOCK.search(line):
                found.append(f"{name}:{n}: asks the clock")
    assert not found, "the core must stay pure (take the time as an argument):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "stand_in", [r"^\s*TYPE_CHECKING\s*=", r"^\s*Protocol\s*=", r"^\s*dataclass\s*="]
)
def test_typing_and_records_are_the_standard_librarys(stand_in: str) -> None:
    pattern = re.compile(stand_in, re.MULTILINE)
    found = [
        f"{p.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
        for p in MODULES.values()
        for text in [p.read_text()]
        for m in pattern.finditer(text)
    ]
    assert not found, f"a stand-in for the standard library's own ({stand_in}): {found}"


#: What the code and docs must not cite: a document outside the repository, or the tracker
#: and sessions that shaped a change (those belong in commit messages). The project's own
#: docs are cited instead (docs/development.md, "Changes").
CITATIONS = re.compile(r"\bSPEC\s*§?\s*\d|\bissues?\s+#?\d+|\bround\s+\d+\b", re.IGNORECASE)


def _texts() -> list[Path]:
    roots = [PACKAGE, ROOT / "tests", ROOT / "docs", ROOT / "bench"]
    files = [p for r in roots for p in r.rglob("*") if p.suffix in (".py", ".md", ".toml", ".sh")]
    tops = ["README.md", "CHANGELOG.md", "pyproject.toml", "schedules.example.toml"]
    return sorted(files + [ROOT / name for name in tops])


def test_code_and_docs_cite_the_projects_own_docs() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()[:100]}"
        for p in _texts()
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if CITATIONS.search(line)
    ]
    assert not found, "cite docs/ instead:\n" + "\n".join(found)


@pytest.mark.parametrize(("page", "most"), [("README.md", 300), ("docs/benchmarks.md", 200)])
def test_the_pages_a_newcomer_reads_first_stay_short(page: str, most: int) -> None:
    """README.md says what cronctl does and links the rest; docs/benchmarks.md gives the
    targets, how to reproduce them and the latest figure (earlier ones are in git)."""
    lines = len((ROOT / page).read_text().splitlines())
    assert lines <= most, f"{page} has {lines} lines (at most {most}): move the rest to docs/"


def test_bench_keeps_at_most_one_example_result_per_script() -> None:
    """Results are written outside git (docs/benchmarks.md); bench/examples holds one per
    script, named after it."""
    scripts = {p.stem for p in (ROOT / "bench").glob("*.py")} | {
        p.stem for p in (ROOT / "bench").glob("*.sh")
    }
    examples = sorted((ROOT / "bench" / "examples").iterdir())
    stems = [p.stem for p in examples]
    assert all(s in scripts for s in stems), f"examples of no script: {stems}"
    assert len(stems) == len(set(stems)), f"more than one example for a script: {stems}"
