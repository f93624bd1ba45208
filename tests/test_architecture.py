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
    "validation": 0, "logmath": 0, "distributed": 0, "sampling": 0, "hamiltonian": 0, "schema": 0,
    "kernels": 1, "models": 2, "data": 3, "paths": 3, "estimators": 4, "zoo": 4, "training": 5, "pictures": 5, "studies": 6,
    "app": 7, "cli": 8, "torchrun": 8, "__init__": 0, "__main__": 9,
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
