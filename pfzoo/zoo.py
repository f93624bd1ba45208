"""Checkpoints: save and load models as registry name + constructor config + ``state_dict``, never a pickled module;
export a trained model into a zoo folder with its model card; the named, hash-checked zoo (:func:`list_pretrained`,
:func:`pretrained`).

A checkpoint is a ``torch.save``d dict of tensors and plain Python values, so it loads with
``torch.load(..., weights_only=True)`` and loading one never runs arbitrary code::

    {
        "format": "pfzoo-checkpoint-1",
        "model": str,               # registry name, e.g. "rbm"
        "model_config": dict,       # model.config(): constructor keyword arguments
        "state_dict": dict,         # model.state_dict()
        "config": dict | None,      # resolved Hydra config of the run, as plain containers
        "trainer_state": dict | None,  # what the Trainer needs to resume (see pfzoo.training.Trainer)
    }

A zoo folder ``<zoo>/<name>/`` holds ``checkpoint.pt`` (no trainer state), ``card.json`` (the machine-readable model
card, :data:`CARD_FIELDS`) and ``README.md`` (the card rendered by :func:`render_card`). The zoo is
``pfzoo/pretrained`` in an installed wheel and the checkout's top-level ``models/`` otherwise (:func:`default_zoo_dir`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pfzoo.models.base import EnergyModel
from pfzoo.models.registry import model_class

FORMAT = "pfzoo-checkpoint-1"
CHECKPOINT_FILE = "checkpoint.pt"
CARD_FILE = "README.md"
CARD_DATA_FILE = "card.json"
CARD_FORMAT = "pfzoo-card-1"
CARD_FIELDS = {
    "format": f"{CARD_FORMAT!r}",
    "name": "the folder's name, what pretrained(name) takes",
    "family": "the model's registry name (pfzoo.models.model_class(family) rebuilds it)",
    "model_config_name": "the conf/model config it was composed from (poe_laplace and poe_student share a family)",
    "model_config": "constructor keyword arguments (model.config())",
    "dataset": "the data set's name (DataSplits.name)",
    "dataset_config": "the resolved conf/dataset node it was trained and measured on (no machine paths)",
    "data_licence": "the licence of the training data",
    "recipe": "{experiment, command, config}: the conf/experiment recipe and the resolved training config (no machine paths)",
    "log_likelihood": "{estimator, kind, value, stderr, data_stderr, num_test, settings, ...}: the measured mean test log-likelihood",
    "log_likelihood_at_init": "the same measurement of the model before training (null when not measured)",
    "date": "when it was trained (YYYY-MM-DD)",
    "pfzoo_version": "the package version that trained it",
    "git_commit": "the commit of the checkout that trained it (null when unknown)",
    "training_seconds": "wall time of the training run (null when unknown)",
    "checkpoint": "{file, sha256, bytes} of checkpoint.pt",
}
"""card.json's keys; ``title``, ``summary``, ``notes`` (a list of sentences) and ``measurements`` (further rows like
``log_likelihood``, each with a ``label``) are optional."""
_PLAIN_SCALARS = (str, int, float, bool, type(None))


def save(
    path: str | os.PathLike,
    model: EnergyModel,
    *,
    config: dict | None = None,
    trainer_state: dict | None = None,
) -> Path:
    """Write a checkpoint of ``model`` to ``path`` atomically; returns the path.

    The file is written to a temporary file in the same directory and moved over ``path`` with
    ``os.replace``, so an interrupted save leaves the previous checkpoint intact.
    ``config`` must consist of dicts, lists and scalars (``OmegaConf.to_container(cfg, resolve=True)``).
    """
    name = type(model).registry_name
    if name is None or model_class(name) is not type(model):
        raise ValueError(f"model must be an instance of a registered model class (see register_model), got {type(model).__name__}")
    if config is not None:
        if not isinstance(config, dict):
            raise ValueError(f"config must be a plain dict or None (OmegaConf.to_container(cfg, resolve=True)), got {type(config).__name__}")
        _check_plain(config, "config")
    checkpoint = {
        "format": FORMAT,
        "model": name,
        "model_config": model.config(),
        "state_dict": model.state_dict(),
        "config": config,
        "trainer_state": trainer_state,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as file:
            torch.save(checkpoint, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | os.PathLike, *, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The raw checkpoint dict at ``path`` (layout in the module docstring), tensors on ``map_location``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint file at {path}")
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # noqa: BLE001  torch.load fails on a damaged file with a dozen types (OSError, KeyError,
        # IndexError, RuntimeError, ...), none naming the file
        reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no detail'}"
        raise ValueError(f"{path} is not a readable {FORMAT} file (truncated or not a checkpoint): {reason}") from error
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        found = checkpoint.get("format") if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise ValueError(f"{path} must be a checkpoint with format {FORMAT!r}, found {found!r}")
    missing = [key for key in ("model", "model_config", "state_dict") if not isinstance(checkpoint.get(key), (str, dict))]
    if missing:
        raise ValueError(f"{path} is a damaged {FORMAT} file: it lacks {', '.join(missing)}")
    return checkpoint


def load(path: str | os.PathLike, *, map_location: str | torch.device = "cpu") -> EnergyModel:
    """Rebuild the model saved at ``path``: ``model_class(name)(**model_config)``, then its ``state_dict``.

    Parameters keep their saved dtype and are placed on ``map_location``. The model comes back in eval mode (it is
    for use, not for more training; call ``.train()`` to train on). A parameter or buffer with a NaN or infinite
    value is refused: every estimate from it would be NaN.
    """
    checkpoint = load_checkpoint(path, map_location=map_location)
    for name, value in checkpoint["state_dict"].items():
        if torch.is_tensor(value) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            count = int((~torch.isfinite(value)).sum())
            raise ValueError(f"{path}: {name} has {count} non-finite value(s) (NaN or inf); the model diverged or the file is corrupt")
    model = model_class(checkpoint["model"])(**checkpoint["model_config"])
    model.load_state_dict(checkpoint["state_dict"], assign=True)
    return model.eval()


def folder_name(family: str, dataset: str, variant: str | None = None) -> str:
    """A zoo folder's name: ``<family>-<dataset>``, or ``<family>-<dataset>-<variant>`` for one of several models of a
    family on a data set (e.g. ``rbm-binarized_mnist-cd1-20``). The app's pretrained lookup uses ``<family>-<dataset>``."""
    for name, value in (("family", family), ("dataset", dataset), ("variant", variant)):
        if value is not None and (not isinstance(value, str) or not value or "/" in value or value != value.strip()):
            raise ValueError(f"{name} must be a non-empty name without '/' or surrounding spaces, got {value!r}")
    return f"{family}-{dataset}" if variant is None else f"{family}-{dataset}-{variant}"


@dataclass(frozen=True)
class ModelCard:
    """A zoo folder's ``README.md``: what the model is, how it was made, what was measured.

    title: the heading (without ``#``). summary: a paragraph under it. facts: ``(name, value)`` rows of a two-column
    table (architecture, data, training command, file, ...). sections: ``(heading, markdown body)`` pairs, each
    rendered as a ``##`` section. Values are markdown and written as given.
    """

    title: str
    summary: str = ""
    facts: Sequence[tuple[str, str]] = ()
    sections: Sequence[tuple[str, str]] = ()

    def render(self) -> str:
        """The card as markdown: blocks separated by blank lines, ending in one newline."""
        blocks = [f"# {self.title}"]
        if self.summary:
            blocks.append(self.summary)
        if self.facts:
            blocks.append("\n".join(["| | |", "|---|---|", *(f"| {name} | {value} |" for name, value in self.facts)]))
        blocks += [f"## {heading}\n\n{body.strip()}" for heading, body in self.sections]
        return "\n\n".join(block.strip("\n") for block in blocks) + "\n"


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
        save(target, load(source), config=None if config is None else portable_config(config))
    if card_data is not None:
        write_card(folder, card_data, readme=card is None)
    if card is not None:
        (folder / CARD_FILE).write_text(card.render() if isinstance(card, ModelCard) else card)
    return target


def portable_config(config: Mapping[str, Any], *, base: str | os.PathLike | None = None) -> dict[str, Any]:
    """``config`` without what only made sense on the machine that trained it: no ``run_dir``, every ``root`` (data
    roots) null, and any other absolute path made relative to ``base`` (default: the current directory) when it lies
    under it, else null. Returns a new plain dict."""
    base_path = Path(base).resolve() if base is not None else Path.cwd().resolve()

    def clean(value: Any, key: str | None) -> Any:
        if isinstance(value, Mapping):
            return {k: clean(v, k) for k, v in value.items() if k != "run_dir"}
        if isinstance(value, (list, tuple)):
            return [clean(v, None) for v in value]
        if key == "root":
            return None
        if isinstance(value, str) and os.path.isabs(value):
            try:
                return Path(value).resolve().relative_to(base_path).as_posix()
            except ValueError:
                return None
        return value

    return clean(config, None)


def default_zoo_dir() -> Path:
    """The pretrained zoo: ``pfzoo/pretrained`` in an installed wheel, the checkout's top-level ``models/`` in an
    editable install or a plain checkout (setup.cfg maps the package ``pfzoo.pretrained`` onto it)."""
    spec = importlib.util.find_spec("pfzoo.pretrained")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        if Path(location).is_dir():
            return Path(location)
    return Path(__file__).resolve().parents[1] / "models"


def file_sha256(path: str | os.PathLike) -> str:
    """The hex SHA-256 of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
        raise ValueError(f"unknown pretrained model {name!r}; the zoo in {_zoo(zoo_dir)} has: {', '.join(names) or 'none'}")
    path = _zoo(zoo_dir) / name / CARD_DATA_FILE
    try:
        card = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from error
    if not isinstance(card, dict) or card.get("format") != CARD_FORMAT:
        raise ValueError(f"{path} must be a model card with format {CARD_FORMAT!r}")
    return card


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


def find_pretrained(
    model_config_name: str, dataset_target: str, *, zoo_dir: str | os.PathLike | None = None
) -> list[str]:
    """Names of the zoo models composed from ``conf/model/<model_config_name>.yaml`` and trained on the data set whose
    config ``_target_`` is ``dataset_target`` (e.g. ``"pfzoo.data.patches"``), sorted."""
    found = []
    for name in list_pretrained(zoo_dir=zoo_dir):
        card = pretrained_card(name, zoo_dir=zoo_dir)
        if card.get("model_config_name") == model_config_name and (card.get("dataset_config") or {}).get("_target_") == dataset_target:
            found.append(name)
    return found


def write_card(folder: str | os.PathLike, card: Mapping[str, Any], *, readme: bool = True) -> dict[str, Any]:
    """Write ``<folder>/card.json`` from ``card`` with ``checkpoint`` set to ``<folder>/checkpoint.pt``'s file name,
    SHA-256 and size, and (``readme``) ``<folder>/README.md`` rendered from it; returns the card written."""
    folder = Path(folder)
    checkpoint = folder / CHECKPOINT_FILE
    if not checkpoint.is_file():
        raise FileNotFoundError(f"no checkpoint file at {checkpoint}")
    data = {"format": CARD_FORMAT, **dict(card)}
    data["checkpoint"] = {"file": CHECKPOINT_FILE, "sha256": file_sha256(checkpoint), "bytes": checkpoint.stat().st_size}
    missing = [key for key in CARD_FIELDS if key not in data]
    if missing:
        raise ValueError(f"card is missing {', '.join(missing)} (see pfzoo.zoo.CARD_FIELDS)")
    _check_plain(data, "card")
    (folder / CARD_DATA_FILE).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    if readme:
        (folder / CARD_FILE).write_text(render_card(data).render())
    return data


def _measurement_row(label: str, m: Mapping[str, Any]) -> str:
    stderr, data_stderr, log_z = m.get("stderr"), m.get("data_stderr"), m.get("log_z")
    digits = 3 if stderr and stderr < 0.01 else 2
    value = "—" if m.get("value") is None else f"{m['value']:.{digits}f}" + (f" ± {stderr:.{digits}f}" if stderr else "")
    if log_z is not None:
        log_z_text = f"{log_z:.3f}" + (f" ± {m['log_z_stderr']:.3f}" if m.get("log_z_stderr") else "")
    else:
        log_z_text = "—"
    return (f"| {label} | {value} | {'—' if data_stderr is None else f'{data_stderr:.2f}'} | {m.get('num_test', '—')} | "
            f"{log_z_text} | {m.get('kind', '—')} |")


def render_card(card: Mapping[str, Any]) -> ModelCard:
    """The markdown model card (``README.md``) of a zoo folder, from its ``card.json`` fields."""
    name = card["name"]
    recipe = card.get("recipe") or {}
    measured = card["log_likelihood"]
    facts = [
        ("model", f"`{card['family']}` (`conf/model/{card['model_config_name']}.yaml`), config `{json.dumps(card['model_config'])}`"),
        ("data", f"`dataset={card['dataset']}`, `{json.dumps(card['dataset_config'])}`"),
        ("data licence", card["data_licence"]),
    ]
    if recipe.get("experiment"):
        facts.append(("recipe", f"`conf/experiment/{recipe['experiment']}.yaml`"))
    if recipe.get("command"):
        facts.append(("training command", f"`{recipe['command']}`"))
    seconds = card.get("training_seconds")
    facts += [
        ("trained", f"{card.get('date') or 'unknown date'}, pfzoo {card.get('pfzoo_version') or '?'}, commit "
                    f"`{(card.get('git_commit') or 'unknown')[:12]}`" + (f", {seconds:.0f} s wall time" if seconds is not None else "")),
        ("file", f"`{card['checkpoint']['file']}` ({card['checkpoint']['bytes']:,} bytes, sha256 `{card['checkpoint']['sha256']}`)"),
        ("load", f"`pfzoo.zoo.pretrained({name!r})`; evaluate with `python scripts/evaluate.py pretrained={name}`"),
    ]
    rows = [_measurement_row(f"trained ({measured.get('estimator', '?')})", measured)]
    initial = card.get("log_likelihood_at_init")
    if initial:
        rows.append(_measurement_row(f"at initialisation ({initial.get('estimator', '?')})", initial))
    rows += [_measurement_row(m.get("label", m.get("estimator", "?")), m) for m in card.get("measurements") or []]
    body = "\n".join(["| | mean test log-likelihood (nats) | test-set sampling stderr | test examples | log Z | kind |",
                      "|---|---:|---:|---:|---:|---|", *rows])
    settings = measured.get("settings")
    if settings:
        body += f"\n\nEstimator settings: `{json.dumps(settings)}`."
    body += "".join(f"\n\n**Warning:** {warning}" for warning in measured.get("warnings") or [])
    sections = [("Measured log-likelihood", body)]
    if card.get("notes"):
        sections.append(("Notes", "\n".join(f"- {note}" for note in card["notes"])))
    summary = card.get("summary") or ("Generated from `card.json` by `pfzoo.zoo.render_card`; the machine-readable card "
                                      "beside it holds the same facts and the full training config.")
    return ModelCard(title=card.get("title") or name, summary=summary, facts=facts, sections=sections)


def _check_plain(value: Any, name: str) -> None:
    """Require nested dicts (string keys), lists/tuples and str/int/float/bool/None scalars."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{name} keys must be strings, got {key!r}")
            _check_plain(item, f"{name}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_plain(item, f"{name}[{index}]")
    elif not isinstance(value, _PLAIN_SCALARS):
        raise ValueError(
            f"{name} must hold only dicts, lists and plain scalars (use OmegaConf.to_container(cfg, resolve=True)), "
            f"got {type(value).__name__}"
        )
