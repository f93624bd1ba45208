"""torch.hub entry points: ``torch.hub.load(<checkout>, "rbm", pretrained="rbm-digits", source="local")``.

The checkout's ``hubconf.py`` exposes one entry point per registered model family, each built by :func:`entrypoint`:
``<family>(pretrained=NAME)`` loads the zoo model ``NAME`` of that family (as ``Family.from_pretrained(NAME)``: hash-checked,
in eval mode) and ``<family>(**config)`` builds a fresh, untrained model from constructor arguments."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import torch

from pfzoo.models.base import EnergyModel
from pfzoo.models.registry import model_class, registered_models


def entrypoint(family: str, *, zoo_dir: str | os.PathLike | None = None) -> Callable[..., EnergyModel]:
    """The torch.hub entry point of the model family registered as ``family`` (e.g. ``"rbm"``).

    The returned callable takes ``pretrained`` (a zoo name of this family, loaded from ``zoo_dir``; ``None``: the
    installed zoo), ``map_location`` (where its tensors go) or, without ``pretrained``, the family's constructor
    arguments (``rbm(num_visible=784, num_hidden=500)``). Both at once are refused in one line.
    """
    cls = model_class(family)
    folder = None if zoo_dir is None else Path(zoo_dir)

    def load(pretrained: str | None = None, *, map_location: str | torch.device = "cpu", **config: Any) -> EnergyModel:
        if pretrained is None:
            return cls(**config)
        if config:
            raise ValueError(f"{family}: pass pretrained=NAME or constructor arguments, not both (got pretrained={pretrained!r} "
                             f"and {', '.join(sorted(config))})")
        return cls.from_pretrained(pretrained, map_location=map_location, zoo_dir=folder)

    load.__name__ = load.__qualname__ = family
    load.__doc__ = (f"pfzoo's {cls.__name__}: ``{family}(pretrained=NAME)`` loads the zoo model NAME (one of "
                    f"``pfzoo.zoo.list_pretrained_weights({family!r})``); ``{family}(**config)`` builds an untrained one.\n\n"
                    f"{cls.__doc__ or ''}")
    return load


def entrypoints(*, zoo_dir: str | os.PathLike | None = None) -> dict[str, Callable[..., EnergyModel]]:
    """One :func:`entrypoint` per registered family, by registry name (what ``hubconf.py`` exposes)."""
    return {family: entrypoint(family, zoo_dir=zoo_dir) for family in registered_models()}
