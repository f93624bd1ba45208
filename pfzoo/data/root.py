"""Where the on-disk datasets live: the argument, else ``$PFZOO_DATA``, else ``~/.cache/pfzoo/data``."""

from __future__ import annotations

import os
import pathlib

ENV_VAR = "PFZOO_DATA"
DEFAULT_ROOT = "~/.cache/pfzoo/data"


def resolve_data_root(root: str | os.PathLike | None = None) -> pathlib.Path:
    """Return the data root with ``~`` expanded; an explicit ``root`` wins over the environment.

    An unset or empty ``PFZOO_DATA`` falls back to ``~/.cache/pfzoo/data``. The folder is not
    required to exist: the loaders report missing files themselves.
    """
    if root is None or os.fspath(root) == "":
        root = os.environ.get(ENV_VAR) or DEFAULT_ROOT
    return pathlib.Path(os.fspath(root)).expanduser()
