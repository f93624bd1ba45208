"""The repository's scripts as modules for the tests: ``from script_modules import load_script`` from any test folder.

Scripts are files, not a package, so a test that calls a script's functions loads its file afresh (module-level state
such as monkeypatched constants then never leaks between tests)."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_script(path: str | Path):
    """The module of the file ``path`` (relative paths from the repository root, e.g. ``"scripts/benchmark.py"``),
    executed afresh under the name ``pfzoo_<stem>_script``."""
    path = REPO / path
    spec = importlib.util.spec_from_file_location(f"pfzoo_{path.stem}_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
