"""Which annealing paths and bases each model family has: the one place that maps a model to its path.

A model names its family in ``model.path_family`` (e.g. ``"rbm"``); the path modules register, per
family, the bases it can anneal from and a builder per path kind::

    register_family("rbm", bases=("base_rate", "uniform"), make_base=...)
    @register_path("rbm", "geometric")
    def rbm_geometric(model, base, kernel, **options) -> AnnealingPath: ...

Estimators call :func:`build`; models never import this module. A new family is one model file
that sets ``path_family`` plus one registration here, next to its path class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from pfzoo.kernels import Kernel
from pfzoo.models.capabilities import MissingCapability, describe, require
from pfzoo.validation import check_matrix

PathBuilder = Callable[..., Any]
BaseBuilder = Callable[[Any, str, "torch.Tensor | None", float], Any]


@dataclass
class PathFamily:
    """A family's bases and path builders.

    bases: valid base names; ``bases[0]`` is what ``base="auto"`` picks when data are given,
        ``free_base`` what it picks without data (``None``: the family needs data for any base).
    make_base: ``(model, name, data, smoothing) -> base model`` with an exactly known ``log Z``.
    choose_base: optional ``(model, data) -> name``, what ``base="auto"`` picks when it depends on the model or the
        data (e.g. a heavy-tailed base for heavy-tailed targets); replaces the ``bases[0]`` / ``free_base`` rule.
    kinds: path kind → ``(model, base, kernel, **options) -> AnnealingPath``.
    """

    name: str
    bases: tuple[str, ...]
    make_base: BaseBuilder
    free_base: str | None
    choose_base: Callable[[Any, "torch.Tensor | None"], str] | None = None
    kinds: dict[str, PathBuilder] = field(default_factory=dict)


_FAMILIES: dict[str, PathFamily] = {}


def register_family(
    name: str, *, bases: tuple[str, ...], make_base: BaseBuilder, free_base: str | None,
    choose_base: Callable[[Any, "torch.Tensor | None"], str] | None = None,
) -> None:
    """Declare family ``name``'s bases (see :class:`PathFamily`)."""
    if name in _FAMILIES:
        raise ValueError(f"path family {name!r} is already registered")
    _FAMILIES[name] = PathFamily(name, tuple(bases), make_base, free_base, choose_base)


def register_path(family: str, kind: str) -> Callable[[PathBuilder], PathBuilder]:
    """Decorator: ``builder(model, base, kernel, **options)`` builds family ``family``'s path of ``kind``."""

    def decorate(builder: PathBuilder) -> PathBuilder:
        entry = _family_entry(family)
        if kind in entry.kinds:
            raise ValueError(f"path kind {kind!r} is already registered for family {family!r}")
        entry.kinds[kind] = builder
        return builder

    return decorate


def _family_entry(name: str) -> PathFamily:
    try:
        return _FAMILIES[name]
    except KeyError:
        raise ValueError(f"path family {name!r} is not registered (register_family first)") from None


def family_of(model, *, by: str = "annealing") -> PathFamily:
    """The registered family of ``model``; :class:`MissingCapability` (one line) when it has no annealing path."""
    require(model, by=by)  # a pfzoo model at all
    name = model.path_family
    if name is None or name not in _FAMILIES:
        raise MissingCapability(
            f"{by} needs an annealing path; {type(model).__name__} {describe(model)} and has none"
            + (" — anneal its latents per example with log_likelihood (estimator=ais or hais)"
               if "latent-variable" in describe(model) else "")
        )
    return _FAMILIES[name]


def improper_reason(model) -> str | None:
    """Why ``model``'s partition function is infinite (``model.improper_reason()``), or ``None``.
    Annealing towards such a model yields a finite number that estimates nothing. Refuses a model that cannot compute
    (meta device, half precision) first: the reason is computed from its parameters."""
    model.check_computable()
    return model.improper_reason()


def is_annealable(model) -> bool:
    """Whether ``model``'s family has registered paths."""
    return model.path_family in _FAMILIES


def path_kinds(model) -> list[str]:
    """The path kinds ``model``'s family offers."""
    return sorted(family_of(model).kinds)


def resolve_base(model, base: str, data: torch.Tensor | None) -> str:
    """The base name ``base`` stands for: ``"auto"`` → the family's ``choose_base(model, data)`` where it has one, else
    its data base when ``data`` are given and its data-free base without; an explicit name must be one of the
    family's. Raises ``ValueError`` (one line) otherwise."""
    entry = family_of(model)
    if not isinstance(base, str):
        raise ValueError(f"base must be a string ('auto' or one of {list(entry.bases)}), got {type(base).__name__}")
    if base == "auto":
        if entry.choose_base is not None:
            return entry.choose_base(model, data)
        if data is not None:
            return entry.bases[0]
        if entry.free_base is None:
            raise ValueError(f"base='auto' for {type(model).__name__} needs data to fit its base {entry.bases[0]!r}; pass data")
        return entry.free_base
    if base not in entry.bases:
        raise ValueError(f"base must be 'auto' or one of {list(entry.bases)} for {type(model).__name__}, got {base!r}")
    return base


def build(
    model,
    *,
    kind: str = "geometric",
    base: str = "auto",
    data: torch.Tensor | None = None,
    smoothing: float = 1.0,
    kernel: Kernel | None = None,
    by: str = "annealing",
    **options,
) -> tuple[Any, str]:
    """The annealing path of ``kind`` from ``model``'s base ``base`` to ``model`` → ``(path, resolved base name)``.

    ``data [N, V]`` feeds data-fitted bases; ``kernel`` replaces the family's default transition where the
    family takes one (continuous models); ``options`` go to the builder (e.g. the RBM spline's ``num_knots``).
    """
    entry = _buildable_family(model, kind, by)
    base_model, name = make_base(model, base=base, data=data, smoothing=smoothing, by=by)
    return entry.kinds[kind](model, base_model, kernel, **options), name


def make_base(model, *, base: str = "auto", data: torch.Tensor | None = None, smoothing: float = 1.0,
              by: str = "annealing") -> tuple[Any, str]:
    """``model``'s tractable base named ``base`` (``data [N, V]`` fits data bases) → ``(base model, resolved name)``.

    A caller that rebuilds the path of a model whose parameters change (a tracker of ``log Z`` during training) makes
    the base once and passes it to :func:`build_from_base` at every rebuild, so ``f_0`` and ``log Z_0`` stay fixed."""
    model.check_computable()  # a meta or half-precision model would fail deep inside a base's fit
    if data is not None:  # a base fitted to no rows (or to rows of another width) is NaN or a shape error deep inside
        check_matrix(data, "data", width=model.num_visible, allow_empty=False)
    entry = family_of(model, by=by)
    name = resolve_base(model, base, data)
    return entry.make_base(model, name, data, smoothing), name


def build_from_base(model, base_model, *, kind: str = "geometric", kernel: Kernel | None = None, by: str = "annealing", **options) -> Any:
    """The annealing path of ``kind`` from ``base_model`` (made by :func:`make_base` for a model of ``model``'s shape)
    to ``model`` as its parameters are now; refuses (one line) a model with infinite Z or a kind its family lacks."""
    return _buildable_family(model, kind, by).kinds[kind](model, base_model, kernel, **options)


def _buildable_family(model, kind: str, by: str) -> PathFamily:
    """``model``'s family, once ``model`` has a finite Z and the family a path of ``kind``; else the one-line refusal."""
    entry = family_of(model, by=by)
    reason = improper_reason(model)
    if reason is not None:
        raise MissingCapability(f"{by} needs a model with finite Z; {type(model).__name__} {reason}")
    if not isinstance(kind, str) or kind not in entry.kinds:
        raise ValueError(f"path must be one of {sorted(entry.kinds)} for {type(model).__name__}, got {kind!r}")
    return entry


def same_family_base(model, name: str, data: torch.Tensor | None, smoothing: float):
    """``model.annealing_base(name, data, smoothing=...)``: the base of families whose bases are of their own family."""
    return model.annealing_base(name, data, smoothing=smoothing)
