"""The zoo, by concern: checkpoint files (:mod:`pfzoo.zoo.checkpoints`: :func:`save`, :func:`load`,
:func:`load_checkpoint`), the named, hash-checked pretrained models and their typed listing (:mod:`pfzoo.zoo.registry`:
:func:`list_pretrained`, :func:`list_pretrained_weights`, :func:`pretrained`, :func:`default_weights`, :func:`export`;
:mod:`pfzoo.zoo.transforms`: the preprocessing bound to the weights), and model cards
(:mod:`pfzoo.zoo.cards`: ``card.json``, :func:`render_card`, :func:`write_card`, :class:`ModelCard`).

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

from pfzoo.zoo.cards import CARD_DATA_FILE, CARD_FIELDS, CARD_FILE, CARD_FORMAT, ModelCard, render_card, write_card
from pfzoo.zoo.checkpoints import CHECKPOINT_FILE, FORMAT, file_sha256, load, load_checkpoint, portable_config, save
from pfzoo.zoo.registry import (
    DEFAULT,
    PretrainedWeights,
    default_weights,
    default_zoo_dir,
    export,
    find_pretrained,
    folder_name,
    list_pretrained,
    list_pretrained_weights,
    load_model,
    load_parameters_into,
    pretrained,
    pretrained_card,
    pretrained_dataset,
    pretrained_path,
    pretrained_weights,
)

__all__ = [
    "CARD_DATA_FILE",
    "CARD_FIELDS",
    "CARD_FILE",
    "CARD_FORMAT",
    "CHECKPOINT_FILE",
    "DEFAULT",
    "FORMAT",
    "ModelCard",
    "PretrainedWeights",
    "default_weights",
    "default_zoo_dir",
    "export",
    "file_sha256",
    "find_pretrained",
    "folder_name",
    "list_pretrained",
    "list_pretrained_weights",
    "load",
    "load_checkpoint",
    "load_model",
    "load_parameters_into",
    "portable_config",
    "pretrained",
    "pretrained_card",
    "pretrained_dataset",
    "pretrained_path",
    "pretrained_weights",
    "render_card",
    "save",
    "write_card",
]
