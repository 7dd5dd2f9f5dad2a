"""The package's folders are its layers: no module imports a layer above its own, and no import
circle, between modules or between packages.

Every import counts, lazy ones (inside a function) and ``TYPE_CHECKING`` ones included: a
circle hidden behind a lazy import is still a circle a reader has to walk. The table is the
one ``docs/design.md`` and the package docstring show.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tkvseam

PACKAGE = Path(tkvseam.__file__).parent

# Top to bottom; a module may import its own layer or any layer below. The longest prefix decides.
LAYERS = {
    "cli": ("cli",),
    "use case": (
        "edit",
        "release",
        "image",
        "overlay.stage",
        "overlay.venv",
        "seamtest",
        "port",
    ),
    "tree": ("tree", "bases.repo", "bases.sdist"),
    "domain": (
        "queue",
        "bases.pins",
        "bases.file",
        "bases.carried",
        "findings",
    ),
    "plumbing": (
        "answer",
        "errors",
        "hints",
        "progress",
        "fsutil",
        "lock",
        "outputs",
        "layout",
        "git",
        "bases.index",
        "bases.unpack",
    ),
}
ORDER = list(LAYERS)
# Run inside other processes (a user's venv, the image, vLLM's pytest): the standard library only.
STANDALONE = (
    "overlay.install",
    "image.plugin_install",
    "seamtest.cuda_alike",
    "seamtest.module_cleanup",
    "seamtest.optimized_bytecode",
    "seamtest.load_plugins",
    "seamtest.outcomes",
    "seamtest.triton_standin",
)


def modules() -> dict[str, Path]:
    out = {}
    for f in PACKAGE.rglob("*.py"):
        parts = list(f.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and parts[-1] != "__main__":
            out[".".join(parts)] = f
    return out


def _longest(name: str, prefixes) -> str | None:
    hits = [p for p in prefixes if name == p or name.startswith(p + ".")]
    return max(hits, key=len) if hits else None


def layer_of(name: str) -> str | None:
    best = None
    for layer, prefixes in LAYERS.items():
        hit = _longest(name, prefixes)
        if hit and (best is None or len(hit) > len(best[1])):
            best = (layer, hit)
    return best[0] if best else None


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package modules it imports (by any import statement anywhere in it)."""
    edges: dict[str, set[str]] = {}
    for name, f in mods.items():
        pkg = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(f.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
                    mod = ".".join(base + ([node.module] if node.module else []))
                elif (node.module or "").startswith("tkvseam"):
                    mod = node.module.removeprefix("tkvseam").lstrip(".")
                else:
                    continue
                targets = [f"{mod}.{a.name}".lstrip(".") for a in node.names] + [mod]
            elif isinstance(node, ast.Import):
                targets = [
                    a.name.removeprefix("tkvseam.") for a in node.names if a.name.startswith("tkvseam.")
                ]
            for t in targets:
                t = next((c for c in (t, t.rpartition(".")[0]) if c in mods), None)
                if t and t != name and not name.startswith(t + ".") and t:
                    found.add(t)
        edges[name] = found
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _packages(mods: dict[str, Path]) -> list[str]:
    return [m for m, f in mods.items() if f.name == "__init__.py" and m]


def test_every_module_has_a_layer():
    mods = modules()
    packages = _packages(mods)
    unplaced = [
        m for m in mods if m and m not in packages and not layer_of(m) and not _longest(m, STANDALONE)
    ]
    assert unplaced == [], f"modules in no layer of LAYERS (add them, and to docs/design.md): {unplaced}"


def _docstring_or_own_modules(node: ast.stmt, package: str) -> bool:
    """A docstring; in ``git`` also ``from . import <its modules>`` and their ``__all__`` (so that
    ``git.repo.head`` reads as the module it is), never a name of a module re-exported."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True
    if package != "git":
        return False
    if isinstance(node, ast.ImportFrom):
        return node.level == 1 and node.module is None
    return isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]


def test_a_package_is_a_folder_not_a_facade():
    """A package's ``__init__`` holds its docstring only (git's names its four modules): an import
    names the module it uses, so the graph above is the real one, and each name is listed once."""
    mods = modules()
    facades = []
    for name in _packages(mods):
        body = ast.parse(mods[name].read_text()).body
        if not all(_docstring_or_own_modules(n, name) for n in body):
            facades.append(name)
    assert facades == []


def test_at_most_a_dozen_modules_at_the_top():
    top = sorted(f.name for f in PACKAGE.glob("*.py"))
    assert len(top) <= 12, top


def test_no_module_imports_a_layer_above_its_own():
    edges = imports(modules())
    wrong = []
    for m, targets in sorted(edges.items()):
        here = layer_of(m)
        for t in sorted(targets):
            there = layer_of(t)
            if here and there and ORDER.index(there) < ORDER.index(here):
                wrong.append(f"{m} ({here}) -> {t} ({there})")
    assert wrong == []


def test_standalone_modules_import_nothing_of_the_package():
    edges = imports(modules())
    wrong = {m: sorted(t) for m, t in edges.items() if _longest(m, STANDALONE) and t}
    assert wrong == {}


def test_no_import_circle():
    assert cycles(imports(modules())) == []


def packages_of(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded onto packages (a module at the top is its own): package -> the
    other packages its modules import."""
    out: dict[str, set[str]] = {}
    for module, targets in edges.items():
        here = module.split(".")[0]
        out.setdefault(here, set())
        for t in targets:
            there = t.split(".")[0]
            out.setdefault(there, set())
            if there != here:
                out[here].add(there)
    return out


def test_no_package_circle():
    """No package imports one that imports it back, however far round: a layer's packages may
    import each other (a use case another's lower helper), but never in a circle."""
    assert cycles(packages_of(imports(modules()))) == []


def test_the_detectors_see_a_hidden_circle_and_a_layer_broken_by_a_lazy_import():
    """The checks above cannot pass by seeing nothing: a circle closed only by a function-level
    import, and a domain module reaching up into a use case, are both found."""
    edges = {"queue.patch": {"edit.apply"}, "edit.apply": {"queue.patch"}}
    assert cycles(edges) == [["edit.apply", "queue.patch"]]
    mods = modules()
    found = imports({"queue.patch": mods["queue.patch"], "edit.apply": mods["edit.apply"]})
    assert "queue.patch" in found["edit.apply"]
    assert layer_of("queue.patch") == "domain" and layer_of("edit.apply") == "use case"
    assert layer_of("tree.porttree") == "tree" and layer_of("port.session") == "use case"


def test_the_package_check_sees_a_circle_no_module_closes():
    """Two packages that import each other through different modules make no module circle, and
    the package check still finds them."""
    edges = {"queue.drift": {"bases.pins"}, "bases.pins": set(), "bases.carried": {"queue.series"}}
    edges["queue.series"] = set()
    assert cycles(edges) == []
    assert cycles(packages_of(edges)) == [["bases", "queue"]]
