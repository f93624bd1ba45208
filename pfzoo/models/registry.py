"""Names of the model classes a checkpoint may rebuild.

Checkpoints record a model by registered name and constructor arguments, never as a pickled
module or an import path, so moving a class does not break saved files and loading a
checkpoint never imports arbitrary code.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from pfzoo.models.base import EnergyModel

_MODELS: dict[str, type[EnergyModel]] = {}

ModelClass = TypeVar("ModelClass", bound=type[EnergyModel])


def register_model(name: str) -> Callable[[ModelClass], ModelClass]:
    """Class decorator: make ``cls`` loadable from checkpoints under ``name``."""

    def decorate(cls: ModelClass) -> ModelClass:
        if name in _MODELS and _MODELS[name] is not cls:
            raise ValueError(f"model name {name!r} is already registered to {_MODELS[name].__name__}")
        _MODELS[name] = cls
        cls.registry_name = name
        return cls

    return decorate


def model_class(name: str) -> type[EnergyModel]:
    """The class registered under ``name``."""
    try:
        return _MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; registered models: {sorted(_MODELS)}") from None


def registered_models() -> list[str]:
    return sorted(_MODELS)


def is_registered_model(value: object) -> bool:
    """Whether ``value`` is an instance of a registered model class itself (not of an unregistered subclass): what a
    checkpoint can record by name."""
    return isinstance(value, EnergyModel) and type(value).registry_name is not None and _MODELS.get(type(value).registry_name) is type(value)
