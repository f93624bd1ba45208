"""The package's shape: no import cycles, dependencies point one way, no model-class checks outside pfzoo/models."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import pfzoo.models

PACKAGE = Path(__file__).resolve().parents[1] / "pfzoo"

# app → studies → training → estimators → paths → models → kernels → utilities (DESIGN.md). A module may import its own
# layer and the layers below it. Kernels act on targets and know no model family; models run kernels in their samplers.
# data generates from models (the spin glass samples an Ising model), so it sits above them.
LAYERS = {
    "validation": 0, "logmath": 0, "distributed": 0, "sampling": 0, "hashed_draws": 0, "hamiltonian": 0, "schema": 0,
    "kernels": 1, "models": 2, "data": 3, "paths": 3, "estimators": 4, "zoo": 4, "training": 5, "pictures": 5, "studies": 6,
    "app": 7, "cli": 8, "cli_hints": 8, "torchrun": 8, "__init__": 0, "__main__": 9,
}


def modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def imported_modules(name: str) -> set[str]:
    """Every pfzoo module ``name`` imports, at any depth of its code (function-level imports included)."""
    path = PACKAGE.parent / (name.replace(".", "/") + ".py")
    if not path.exists():
        path = PACKAGE.parent / name.replace(".", "/") / "__init__.py"
    known = set(modules())
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pfzoo"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in known else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("pfzoo"))
    return {module for module in found if module in known and module != name}


def layer(name: str) -> int:
    parts = name.split(".")
    return LAYERS[parts[1]] if len(parts) > 1 else 0


def test_no_import_cycle_in_the_package():
    graph = {name: imported_modules(name) for name in modules()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for neighbour in graph[node]:
            if neighbour.endswith("__init__") or neighbour == "pfzoo":
                continue
            if state.get(neighbour) == 1 and not _is_package_of(neighbour, node):
                cycle = stack[stack.index(neighbour):] + [neighbour]
                pytest.fail("import cycle: " + " → ".join(cycle))
            if neighbour not in state:
                visit(neighbour)
        stack.pop()
        state[node] = 2

    for name in graph:
        if name not in state:
            visit(name)


def _is_package_of(package: str, module: str) -> bool:
    """A package's ``__init__`` re-exports its modules; a module importing a sibling through the package is no cycle."""
    return module.startswith(package + ".")


def test_dependencies_point_one_way():
    upward = [
        f"{name} imports {imported}"
        for name in modules() if "." in name
        for imported in imported_modules(name)
        if "." in imported and layer(imported) > layer(name)
    ]
    assert upward == []


@pytest.mark.slow
def test_every_module_imports_on_its_own():
    # Importing any pfzoo module first runs `import pfzoo` to completion, so what `import pfzoo` loads is loaded, in the
    # same order, whichever module a fresh process imports: it stays loaded, and only the rest is forgotten between
    # modules (re-running the package import for each of ~160 modules took over a minute).
    script = (
        "import importlib, sys\n"
        "import pfzoo\n"
        "package = {m for m in sys.modules if m.startswith('pfzoo')}\n"
        f"for name in {modules()!r}:\n"
        "    for loaded in [m for m in sys.modules if m.startswith('pfzoo') and m not in package]:\n"
        "        del sys.modules[loaded]\n"
        "    importlib.import_module(name)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_no_model_class_checks_outside_the_models_package():
    model_classes = {name for name in pfzoo.models.__all__ if isinstance(getattr(pfzoo.models, name), type)}
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name == "models":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass"):
                classes = node.args[1]
                names = [c.id for c in (classes.elts if isinstance(classes, ast.Tuple) else [classes]) if isinstance(c, ast.Name)]
                offenders += [f"{path.relative_to(PACKAGE)}:{node.lineno} {n}" for n in names if n in model_classes]
    assert offenders == []


def _model_probes(path: Path) -> list[str]:
    """``hasattr``/``getattr`` on an object named like a model (``model``, ``target``, ``base``, ``rbm``, ...) in one file."""
    names = ("model", "rbm", "dbm", "dbn", "ising", "knot")
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr") and node.args:
            subject = node.args[0]
            name = subject.id if isinstance(subject, ast.Name) else getattr(subject, "attr", "")
            if isinstance(subject, ast.Call) and isinstance(subject.func, ast.Name) and subject.func.id == "type" and subject.args:
                inner = subject.args[0]
                name = inner.id if isinstance(inner, ast.Name) else getattr(inner, "attr", "")
            if any(word in name.lower() for word in names):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.func.id}({name}, ...)")
    return found


def test_no_model_probes_outside_the_models_package():
    """Consumers ask for declared capabilities and methods, never whether a model happens to have an attribute."""
    offenders = [hit for path in PACKAGE.rglob("*.py") if "models" not in path.relative_to(PACKAGE).parts for hit in _model_probes(path)]
    assert offenders == []


def test_no_family_name_comparisons_outside_the_models_package():
    """A family's name (``path_family``, ``registry_name``) may key a registry, never an ``if`` that singles a family out."""
    families = {"rbm", "dbm", "dbn", "ising", "hopfield", "gaussian", "gaussian_rbm", "continuous", "binary_energy", "poe", "ica", "mcrbm"}
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if "models" in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                attributes = {side.attr for side in sides if isinstance(side, ast.Attribute)}
                constants = {side.value for side in sides if isinstance(side, ast.Constant) and isinstance(side.value, str)}
                if attributes & {"path_family", "registry_name"} and constants & families:
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == []


def test_kernels_import_no_model_family():
    """Kernels act on targets: nothing under pfzoo/kernels imports pfzoo.models, pfzoo.paths or anything above them."""
    offenders = [
        f"{name} imports {imported}"
        for name in modules() if name.startswith("pfzoo.kernels")
        for imported in imported_modules(name)
        if imported.startswith(("pfzoo.models", "pfzoo.paths", "pfzoo.estimators", "pfzoo.training", "pfzoo.data"))
    ]
    assert offenders == []


PROTOCOL_OWNERS = {"path": ("paths",), "kernel": ("kernels",), "target": ("models", "paths")}
"""An object named like a path, kernel or target, and the packages that define such objects: only there may code ask
whether one happens to have an attribute; everywhere else the protocols declare it (``path.warnings``, ``target.offers``,
:func:`pfzoo.kernels.reflection_bounds`)."""


def test_no_probes_of_paths_kernels_or_targets_outside_their_packages():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        package = path.relative_to(PACKAGE).parts[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr") and node.args:
                subject = node.args[0]
                name = (subject.id if isinstance(subject, ast.Name) else getattr(subject, "attr", "")).lower()
                for word, owners in PROTOCOL_OWNERS.items():
                    if word in name and package not in owners:
                        offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.func.id}({name}, ...)")
    assert offenders == []


DRAWS = {"bernoulli", "bernoulli_", "draw_hidden", "draw_visible", "draw_block", "draw_odd", "draw_even", "leapfrog", "uniform"}
"""Calls that draw a state from a conditional, move it along a trajectory or decide a Metropolis or exchange move: the
inside of a Markov transition."""
ANCESTRAL_PASSES = {"pfzoo/models/dbn.py:_recognize_top_visible"}
"""Loops that draw each layer once from the one below (a DBN's recognition pass): ancestral sampling, not a chain."""


def _markov_loops(path: Path, root: Path) -> list[str]:
    """``file:function`` (relative to ``root``) of the ``for``/``while`` loops in ``path`` that draw a state from a
    conditional and feed it back into the next draw: a loop whose body assigns a name that a draw's arguments read
    (``x = bernoulli(σ(x W))``)."""
    found = set()
    for function in ast.walk(ast.parse(path.read_text())):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for loop in ast.walk(function):
            if not isinstance(loop, (ast.For, ast.While)):
                continue
            assignments = [(_names(node.targets[0] if isinstance(node, ast.Assign) else node.target), node.value) for node in ast.walk(loop)
                           if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None]
            draws = [node for node in ast.walk(loop) if isinstance(node, ast.Call) and _called(node) in DRAWS]
            # names that hold a drawn state, or anything computed from one in the loop (a fixed point over the assignments)
            tainted = {name for names, value in assignments if any(_called(call) in DRAWS for call in ast.walk(value) if isinstance(call, ast.Call)) for name in names}
            while True:
                grown = tainted | {name for names, value in assignments if _names(value) & tainted for name in names}
                if grown == tainted:
                    break
                tainted = grown
            if any(_names(argument) & tainted for draw in draws for argument in draw.args):
                found.add(f"{path.relative_to(root).as_posix()}:{function.name}")
    return sorted(found)


def _names(node: ast.AST) -> set[str]:
    return {name.id for name in ast.walk(node) if isinstance(name, ast.Name)}


def _called(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def test_the_loop_detector_finds_a_written_out_gibbs_loop(tmp_path):
    source = tmp_path / "chain.py"
    source.write_text("def chain(v, w, k, g):\n    for _ in range(k):\n        p = sigmoid(v @ w)\n        h = bernoulli(p, generator=g)\n"
                      "        v = bernoulli(sigmoid(h @ w.T), generator=g)\n    return v\n\n\n"
                      "def ancestral(layers, g):\n    for w in weights:\n        logits = layers[-1] @ w\n"
                      "        layers.append(bernoulli(sigmoid(logits), generator=g))\n    return layers\n")
    assert _markov_loops(source, tmp_path) == ["chain.py:chain"]


def test_no_sampling_loop_outside_the_kernels():
    """Every Markov transition runs through a :class:`pfzoo.kernels.Kernel`: no Gibbs, HMC or exchange loop is written
    out anywhere else in the package or the scripts."""
    root = PACKAGE.parent
    files = [path for path in PACKAGE.rglob("*.py") if not path.is_relative_to(PACKAGE / "kernels")] + sorted((root / "scripts").glob("*.py"))
    offenders = [loop for path in files for loop in _markov_loops(path, root) if loop not in ANCESTRAL_PASSES]
    assert offenders == []


MAX_MODULE_LINES = 600
MAX_SCRIPT_LINES = 150


def test_modules_and_scripts_stay_short():
    """A module past 600 lines holds more than one concept; a script past 150 holds research code that belongs in
    :mod:`pfzoo.studies` (scripts parse arguments, call the library and render)."""
    root = PACKAGE.parent
    long_modules = [f"{path.relative_to(root)}: {lines}" for path in sorted(PACKAGE.rglob("*.py"))
                    if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES]
    long_scripts = [f"{path.relative_to(root)}: {lines}" for path in sorted((root / "scripts").glob("*.py"))
                    if (lines := len(path.read_text().splitlines())) > MAX_SCRIPT_LINES]
    assert long_modules + long_scripts == []
