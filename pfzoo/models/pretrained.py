"""Where ``Family.from_pretrained(name)`` finds the zoo: models sit below the zoo (:mod:`pfzoo.zoo`), so the zoo
registers its loader here when it is imported (``import pfzoo`` imports it) and the model classes ask through it."""

from __future__ import annotations

import os
from typing import Any, Protocol


class PretrainedSource(Protocol):
    """What :meth:`~pfzoo.models.EnergyModel.from_pretrained` needs of the zoo."""

    def classes(self, *, zoo_dir: str | os.PathLike | None) -> dict[str, type]:
        """Every pretrained name of the zoo in ``zoo_dir`` (``None``: the default zoo) with its model's class."""

    def load(self, name: str, *, map_location: Any, zoo_dir: str | os.PathLike | None) -> Any:
        """The hash-checked model ``name`` on ``map_location``."""

    def location(self, zoo_dir: str | os.PathLike | None) -> str:
        """The zoo folder, for messages."""

    def default(self, family: type, *, zoo_dir: str | os.PathLike | None) -> str:
        """The name of ``family``'s ``DEFAULT`` weights (:func:`pfzoo.zoo.default_weights`)."""


_SOURCE: list[PretrainedSource] = []


def register_pretrained_source(source: PretrainedSource) -> None:
    """Make ``source`` the zoo that ``from_pretrained`` reads (:mod:`pfzoo.zoo` registers itself on import)."""
    _SOURCE[:] = [source]


def pretrained_source() -> PretrainedSource:
    """The registered zoo; ``RuntimeError`` when none is (only possible when ``pfzoo.zoo`` was never imported)."""
    if not _SOURCE:
        raise RuntimeError("no pretrained zoo is registered; import pfzoo (or pfzoo.zoo) first")
    return _SOURCE[0]
