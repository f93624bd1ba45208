"""The named zoo: the folders of the pretrained models, their typed listing (:class:`PretrainedWeights`,
:func:`list_pretrained_weights`), the hash-checked loading by name (:func:`pretrained`), and :func:`export`, which adds a
folder."""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from pfzoo.models.base import EnergyModel
from pfzoo.models.pretrained import register_pretrained_source
from pfzoo.models.registry import model_class
from pfzoo.zoo.cards import CARD_DATA_FILE, CARD_FILE, CARD_FORMAT, ModelCard, write_card
from pfzoo.zoo.checkpoints import CHECKPOINT_FILE, file_sha256, load, load_checkpoint, portable_config, save
from pfzoo.zoo.transforms import weights_transform


def default_zoo_dir() -> Path:
    """The pretrained zoo: ``pfzoo/pretrained`` in an installed wheel, the checkout's top-level ``models/`` in an
    editable install or a plain checkout (setup.cfg maps the package ``pfzoo.pretrained`` onto it)."""
    spec = importlib.util.find_spec("pfzoo.pretrained")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        if Path(location).is_dir():
            return Path(location)
    return Path(__file__).resolve().parents[2] / "models"


def folder_name(family: str, dataset: str, variant: str | None = None) -> str:
    """A zoo folder's name: ``<family>-<dataset>``, or ``<family>-<dataset>-<variant>`` for one of several models of a
    family on a data set (e.g. ``rbm-binarized_mnist-cd1-20``). The app's pretrained lookup uses ``<family>-<dataset>``."""
    for name, value in (("family", family), ("dataset", dataset), ("variant", variant)):
        if value is not None and (not isinstance(value, str) or not value or "/" in value or value != value.strip()):
            raise ValueError(f"{name} must be a non-empty name without '/' or surrounding spaces, got {value!r}")
    return f"{family}-{dataset}" if variant is None else f"{family}-{dataset}-{variant}"


def export(
    checkpoint: str | os.PathLike,
    folder: str | os.PathLike,
    *,
    card: ModelCard | str | None = None,
    card_data: Mapping[str, Any] | None = None,
) -> Path:
    """Put the model of ``checkpoint`` into the zoo folder ``folder``; returns ``<folder>/checkpoint.pt``.

    The zoo's copy holds the model and the run's config made portable (:func:`portable_config`: no run directory,
    no data root, no other machine path) but no trainer state (no optimiser state or persistent chains): what users
    load, not what resumes training. When ``checkpoint`` already is ``<folder>/checkpoint.pt`` it is left untouched,
    so a card can be rewritten without rewriting the weights. ``card_data`` (card.json's fields, :data:`CARD_FIELDS`;
    ``checkpoint`` is filled in here) is written by :func:`write_card`, which also renders ``README.md`` from it
    unless ``card`` is given. ``card`` (a :class:`ModelCard` or markdown text) is written to ``<folder>/README.md``;
    ``None`` leaves any card there as is (or renders ``card_data``).
    """
    source, folder = Path(checkpoint), Path(folder)
    target = folder / CHECKPOINT_FILE
    if card is not None and not isinstance(card, (ModelCard, str)):
        raise ValueError(f"card must be a ModelCard, markdown text or None, got {type(card).__name__}")
    if not (target.is_file() and source.resolve() == target.resolve()):
        config = load_checkpoint(source)["config"]
        save(load(source), target, config=None if config is None else portable_config(config))
    if card_data is not None:
        write_card(folder, card_data, readme=card is None)
    if card is not None:
        (folder / CARD_FILE).write_text(card.render() if isinstance(card, ModelCard) else card)
    return target


def _zoo(zoo_dir: str | os.PathLike | None) -> Path:
    return Path(zoo_dir) if zoo_dir is not None else default_zoo_dir()


def list_pretrained(*, zoo_dir: str | os.PathLike | None = None) -> list[str]:
    """The names :func:`pretrained` takes, sorted: the zoo's folders holding both ``checkpoint.pt`` and ``card.json``."""
    folder = _zoo(zoo_dir)
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if (p / CHECKPOINT_FILE).is_file() and (p / CARD_DATA_FILE).is_file())


def pretrained_card(name: str, *, zoo_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """The machine-readable card (``card.json``) of the zoo model ``name``; ``ValueError`` listing the names when unknown."""
    names = list_pretrained(zoo_dir=zoo_dir)
    if not isinstance(name, str) or name not in names:
        nearest = difflib.get_close_matches(name, names, n=1) if isinstance(name, str) else []
        hint = f"did you mean {nearest[0]}? " if nearest else ""
        raise ValueError(f"unknown pretrained model {name!r}; {hint}the zoo in {_zoo(zoo_dir)} has: {', '.join(names) or 'none'}")
    path = _zoo(zoo_dir) / name / CARD_DATA_FILE
    try:
        card = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from error
    if not isinstance(card, dict) or card.get("format") != CARD_FORMAT:
        raise ValueError(f"{path} must be a model card with format {CARD_FORMAT!r}")
    return card


def pretrained_dataset(name: str, data_root: str | os.PathLike | None = None, *, zoo_dir: str | os.PathLike | None = None):
    """The data set (:class:`~pfzoo.data.DataSplits`) zoo model ``name`` was trained and measured on, built from its card's
    ``dataset_config`` with ``root`` set to ``data_root`` (for data sets read from files; ``None``: their default root)."""
    from hydra.utils import instantiate  # Hydra's import costs a second; only the data-set builders need it

    config = dict(pretrained_card(name, zoo_dir=zoo_dir)["dataset_config"])
    if "root" in config:
        config["root"] = None if data_root is None else str(data_root)
    return instantiate(config)


def pretrained_path(name: str, *, zoo_dir: str | os.PathLike | None = None) -> Path:
    """``checkpoint.pt`` of the zoo model ``name`` after checking its SHA-256 against its card; a mismatch raises
    ``ValueError`` naming the file."""
    card = pretrained_card(name, zoo_dir=zoo_dir)
    path = _zoo(zoo_dir) / name / CHECKPOINT_FILE
    expected = (card.get("checkpoint") or {}).get("sha256")
    found = file_sha256(path)
    if found != expected:
        raise ValueError(
            f"{path} does not match its card: sha256 {found} but card.json records {expected}; the file was changed or "
            f"damaged (re-export it with scripts/build_zoo.py, or restore it)"
        )
    return path


def pretrained(name: str, *, map_location: str | torch.device = "cpu", zoo_dir: str | os.PathLike | None = None) -> EnergyModel:
    """The zoo model ``name`` (one of :func:`list_pretrained`), hash-checked against its card, on ``map_location``.

    >>> model = pretrained("rbm-digits")          # doctest: +SKIP
    """
    return load(pretrained_path(name, zoo_dir=zoo_dir), map_location=map_location)


def load_model(source: str | os.PathLike, *, name: str = "source", map_location: str | torch.device = "cpu") -> EnergyModel:
    """The model that ``source`` names: a checkpoint file's path (a path wins when a file of that name exists) or a zoo
    name (one of :func:`list_pretrained`). ``name`` is the argument's name in the error for anything else."""
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"{name} must be a zoo name or a checkpoint path, got {type(source).__name__} {source!r}")
    if Path(source).is_file():
        return load(source, map_location=map_location)
    if isinstance(source, str) and source in list_pretrained():
        return pretrained(source, map_location=map_location)
    raise ValueError(f"{name}={str(source)!r} is neither a checkpoint file nor a zoo model; give a path to a checkpoint.pt "
                     f"or one of pfzoo.zoo.list_pretrained()")


@torch.no_grad()
def load_parameters_into(model: EnergyModel, source: str | os.PathLike, *, name: str = "source") -> None:
    """Overwrite ``model``'s parameters and buffers with those of the trained model ``source`` names (a checkpoint path or
    a zoo name, as :func:`load_model`): a start for more training with another recipe, say a DBM trained by one objective
    fine-tuned by another (a run's own ``resume`` refuses changed settings). The two must be the same class with the same
    :meth:`~pfzoo.models.EnergyModel.config` (shapes included); values are cast to ``model``'s device and dtype."""
    trained = load_model(source, name=name, map_location=model.device)
    if type(trained) is not type(model) or trained.config() != model.config():
        raise ValueError(f"{name}={str(source)!r} is a {type(trained).__name__} with config {trained.config()}, but the model to "
                         f"start is a {type(model).__name__} with config {model.config()}: they must match")
    model.load_state_dict(trained.state_dict())


@dataclass(frozen=True)
class PretrainedWeights:
    """One named zoo model as its card describes it: what :func:`pretrained` loads under :attr:`name`, what it is, what
    it was trained on and by which recipe, and its headline number (as torchvision's weights enums describe theirs).

    Built from ``<zoo>/<name>/card.json`` (:data:`~pfzoo.zoo.cards.CARD_FIELDS`) by :func:`pretrained_weights`; listed
    by :func:`list_pretrained_weights`.

    Attributes:
        name: the zoo folder's name, what :func:`pretrained` takes.
        family: the model's registry name (``pfzoo.models.model_class(family)`` is its class).
        model_config_name: the ``conf/model`` option it was composed from (``poe_laplace`` and ``poe_student`` share a family).
        dataset: the data set's name (``DataSplits.name``); dataset_target: its config's ``_target_``.
        log_likelihood: the headline mean test log-likelihood in nats; log_likelihood_stderr: its standard error
            (0 when exact); kind: what kind of number it is (exact, a stochastic lower bound, ...); estimator: what
            measured it; num_test: on how many test examples (None when the card does not say).
        recipe: the ``conf/experiment`` recipe that trained it; command: the command that reruns the training.
        folder: the zoo folder; sha256: the checkpoint's SHA-256, checked on every load.
        num_parameters: the number of values in the checkpoint's ``state_dict`` (parameters and buffers).
        file_size: the checkpoint file's size in bytes.
        dataset_config: the card's data config (what :meth:`transforms` and :func:`pretrained_dataset` build from);
            model_config: the model's constructor arguments.

    :meth:`transforms` gives the preprocessing bound to the weights (raw images or patches to the rows the model takes);
    :func:`default_weights` names each family's ``DEFAULT`` entry, what ``Family.from_pretrained("DEFAULT")`` loads.
    """

    name: str
    family: str
    model_config_name: str
    dataset: str
    dataset_target: str
    log_likelihood: float
    log_likelihood_stderr: float
    kind: str
    estimator: str
    num_test: int | None
    recipe: str
    command: str | None
    folder: Path
    sha256: str
    num_parameters: int
    file_size: int
    dataset_config: Mapping[str, Any]
    model_config: Mapping[str, Any]

    @classmethod
    def from_card(cls, card: Mapping[str, Any], folder: str | os.PathLike) -> "PretrainedWeights":
        """The entry of the zoo folder ``folder`` from its card (a ``card.json`` dict); ``ValueError`` naming what is missing."""
        folder = Path(folder)
        measured, recipe = card.get("log_likelihood") or {}, card.get("recipe") or {}
        required = {"name": card.get("name"), "family": card.get("family"), "model_config_name": card.get("model_config_name"),
                    "dataset": card.get("dataset"), "dataset_config._target_": (card.get("dataset_config") or {}).get("_target_"),
                    "log_likelihood.value": measured.get("value"), "log_likelihood.kind": measured.get("kind"),
                    "log_likelihood.estimator": measured.get("estimator"), "recipe.experiment": recipe.get("experiment"),
                    "checkpoint.sha256": (card.get("checkpoint") or {}).get("sha256")}
        missing = [key for key, value in required.items() if value is None]
        if missing:
            raise ValueError(f"{folder / CARD_DATA_FILE} lacks {', '.join(missing)} (see pfzoo.zoo.CARD_FIELDS)")
        return cls(
            name=card["name"], family=card["family"], model_config_name=card["model_config_name"], dataset=card["dataset"],
            dataset_target=card["dataset_config"]["_target_"], log_likelihood=float(measured["value"]),
            log_likelihood_stderr=float(measured.get("stderr") or 0.0), kind=measured["kind"], estimator=measured["estimator"],
            num_test=measured.get("num_test"), recipe=recipe["experiment"], command=recipe.get("command"), folder=folder,
            sha256=card["checkpoint"]["sha256"], num_parameters=count_values(folder / CHECKPOINT_FILE),
            file_size=(folder / CHECKPOINT_FILE).stat().st_size, dataset_config=dict(card["dataset_config"]),
            model_config=dict(card.get("model_config") or {}),
        )

    @property
    def model_class(self) -> type[EnergyModel]:
        """The class :meth:`load` returns (registered under :attr:`family`)."""
        return model_class(self.family)

    @property
    def checkpoint(self) -> Path:
        """The weights file, ``<folder>/checkpoint.pt``."""
        return self.folder / CHECKPOINT_FILE

    def load(self, *, map_location: str | torch.device = "cpu") -> EnergyModel:
        """The model, hash-checked against its card, on ``map_location`` (as :func:`pretrained`)."""
        return pretrained(self.name, map_location=map_location, zoo_dir=self.folder.parent)

    def transforms(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """The preprocessing these weights were trained behind (:mod:`pfzoo.zoo.transforms`), as a callable from raw
        inputs ``[N, ...]`` to the float32 rows ``[N, V]`` the model takes: thresholding for the digits and MNIST models,
        the patch whitening (refitted from the card's data config: seconds) for the image-patch models, none for spin
        glasses and Hopfield patterns. ``str()`` of it says what it does."""
        from hydra.utils import instantiate  # Hydra's import costs a second; only the patch models' data need it

        config = self.model_config
        num_features = config.get("num_visible") or config.get("num_units") or config["layer_sizes"][0]
        return weights_transform(self.dataset_config, int(num_features), instantiate)


def count_values(path: Path) -> int:
    """The number of values in the ``state_dict`` of the checkpoint at ``path``, read memory-mapped (no copy)."""
    state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)["state_dict"]
    return sum(value.numel() for value in state.values() if torch.is_tensor(value))


def pretrained_weights(name: str, *, zoo_dir: str | os.PathLike | None = None) -> PretrainedWeights:
    """The typed entry of the zoo model ``name``; ``ValueError`` listing the names when unknown."""
    return PretrainedWeights.from_card(pretrained_card(name, zoo_dir=zoo_dir), _zoo(zoo_dir) / name)


def list_pretrained_weights(
    family: str | type[EnergyModel] | None = None, *, zoo_dir: str | os.PathLike | None = None
) -> list[PretrainedWeights]:
    """Every zoo model's typed entry (family, data set, headline log-likelihood, recipe, file, ...), sorted by name,
    as torchvision's ``get_model_weights`` lists a model's weights: ``family`` (a registry name such as ``"rbm"``, or a
    model class, which also takes its subclasses' entries) keeps that family's; ``None`` keeps all."""
    if family is not None and not isinstance(family, (str, type)):
        raise ValueError(f"family must be a registry name, a model class or None, got {type(family).__name__}")
    wanted = model_class(family) if isinstance(family, str) else family
    entries = [pretrained_weights(name, zoo_dir=zoo_dir) for name in list_pretrained(zoo_dir=zoo_dir)]
    return entries if wanted is None else [entry for entry in entries if issubclass(entry.model_class, wanted)]


DEFAULT = "DEFAULT"
"""The name that stands for a family's default weights: ``RBM.from_pretrained("DEFAULT")``, ``torch.hub.load(...,
"rbm", pretrained="DEFAULT")`` (as torchvision's ``weights="DEFAULT"``)."""


def default_weights(family: str | type[EnergyModel], *, zoo_dir: str | os.PathLike | None = None) -> PretrainedWeights:
    """The ``DEFAULT`` weights of ``family`` (a registry name or a model class): of the family's entries, those whose
    data ship with the package (a data config without a data root, or patches from the embedded photos), so that
    they evaluate on any machine, and among them the best headline log-likelihood (``poe``: the Student-t experts);
    every entry when none does. The family's own entries come before its subclasses' (``ising``: the spin glass, not
    the Hopfield network). ``ValueError`` naming the families that have weights when ``family`` has none."""
    entries = list_pretrained_weights(family, zoo_dir=zoo_dir)
    name = family if isinstance(family, str) else family.registry_name
    entries = [entry for entry in entries if entry.family == name] or entries  # Ising's own before its subclass Hopfield's
    if not entries:
        families = sorted({entry.family for entry in list_pretrained_weights(zoo_dir=zoo_dir)})
        raise ValueError(f"family={family!r} has no pretrained weights in {_zoo(zoo_dir)}; families with weights: {', '.join(families)}")
    shipped = [entry for entry in entries if ships_with_package(entry.dataset_config)]
    return max(shipped or entries, key=lambda entry: (entry.log_likelihood, entry.name))


def ships_with_package(dataset_config: Mapping[str, Any]) -> bool:
    """Whether the data set of ``dataset_config`` is built without files (scikit-learn's digits and photos, simulated
    spin glasses and patterns): no ``root`` setting, or patches from the ``embedded`` photos."""
    return "root" not in dataset_config or dataset_config.get("source") == "embedded"


def find_pretrained(
    model_config_name: str, dataset_target: str, *, zoo_dir: str | os.PathLike | None = None
) -> list[str]:
    """Names of the zoo models composed from ``conf/model/<model_config_name>.yaml`` and trained on the data set whose
    config ``_target_`` is ``dataset_target`` (e.g. ``"pfzoo.data.patches"``), sorted."""
    return [entry.name for entry in list_pretrained_weights(zoo_dir=zoo_dir)
            if entry.model_config_name == model_config_name and entry.dataset_target == dataset_target]


class _ZooSource:
    """The zoo as :class:`pfzoo.models.pretrained.PretrainedSource`: what ``Family.from_pretrained`` reads."""

    def classes(self, *, zoo_dir: str | os.PathLike | None) -> dict[str, type[EnergyModel]]:
        return {entry.name: entry.model_class for entry in list_pretrained_weights(zoo_dir=zoo_dir)}

    def load(self, name: str, *, map_location: str | torch.device, zoo_dir: str | os.PathLike | None) -> EnergyModel:
        return pretrained(name, map_location=map_location, zoo_dir=zoo_dir)

    def location(self, zoo_dir: str | os.PathLike | None) -> str:
        return str(_zoo(zoo_dir))

    def default(self, family: type[EnergyModel], *, zoo_dir: str | os.PathLike | None) -> str:
        return default_weights(family, zoo_dir=zoo_dir).name


register_pretrained_source(_ZooSource())
