"""Greedy layer-wise training of deep belief nets (Hinton, Osindero & Teh 2006, §4).

The bottom RBM is fitted to the data; the data are then mapped up through its recognition
conditional ``q(h | v) = σ(vW + c)`` (binary samples, because the next RBM is a binary model),
the next RBM is fitted to those samples, and so on up to the top RBM. Each RBM is trained by an
ordinary :class:`~pfzoo.training.Trainer` in its own sub-folder ``<run_dir>/layer<i>``, so every
layer gets the Trainer's metrics file, checkpoints and exact resume.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pfzoo import distributed
from pfzoo.estimators.base import ProgressCallback
from pfzoo.models.capabilities import Capability, require
from pfzoo.models.dbn import DBN
from pfzoo.sampling import bernoulli
from pfzoo.training.callbacks import TrainingCallback
from pfzoo.training.contrastive import CD
from pfzoo.training.fit_data import TrainingData, fixed_draws, training_data
from pfzoo.training.metrics import estimate_record
from pfzoo.training.trainer import DEFAULT_OPTIMIZER, OptimizerFactory, Trainer
from pfzoo.validation import check_positive_int
from pfzoo.zoo import load_model, save

logger = logging.getLogger(__name__)

LAYER_DIR = "layer{}"
_LAYER_SEED_STRIDE = 4  # layer i trains with seeds seed + 4i … seed + 4i + 2 (Trainer's streams) …
_MAPPING_SEED_OFFSET = 3  # … and maps its data up with seed + 4i + 3
EXTRA_UNIT_SCALE = 0.1
"""start_from_layer_below: the factor on the initial weights of the hidden units beyond the layer below's visible ones
(0.01 → 0.001 for the default ``init_std``): too small to move the stack's log-likelihood by much, large enough to tell
the units apart."""


class GreedyTrainer(Trainer):
    """Trains a :class:`~pfzoo.models.DBN` layer by layer with a :class:`Trainer` per RBM.

    Takes the same arguments as :class:`Trainer` (so any trainer config can target it: ``conf/training/dbn.yaml`` does
    for ``model=dbn``), with ``epochs`` counted *per layer*. It trains any model that declares
    :attr:`~pfzoo.models.Capability.RBM_STACK` (``model.rbms``, bottom first) and refuses others. For i = 0 … L-1:

    1. if ``init_from_below`` and i > 0, ``rbms[i]`` starts as ``rbms[i-1]`` turned upside down
       (:func:`start_from_layer_below`), so the stack starts as good as the one a layer lower; else, if
       ``init_from_data``, ``rbms[i]``'s visible biases are set to the base-rate logits of its
       training input (:meth:`RBM.init_from_data <pfzoo.models.RBM.init_from_data>`);
    2. ``rbms[i]`` is trained on its input by ``Trainer(deepcopy(objective), …, run_dir=<run_dir>/layer<i>,
       seed=seed + 4i)`` (a fresh copy of the objective per layer, so e.g. PCD chains are per layer);
    3. the training rows and (where there are some) the held-out rows are mapped up,
       ``x_{i+1} ~ q(x_{i+1} | x_i) = Bernoulli(σ(x_i W_i + c_i))``, with a generator on the model's device seeded
       ``seed + 4i + 3`` (training rows first, so the training inputs do not depend on the held-out data). With
       ``binarize`` the rows handed up are the probabilities ``σ(x_i W_i + c_i)`` of one draw ``x_i`` of the layer's
       input, and the layer above trains on a fresh draw of them at every minibatch (:class:`TrainerSettings`
       ``binarize``): for a two-layer DBN fresh samples of the exact posterior q(h₁ | v), where a fixed sample per row
       lets the top RBM fit that sample's noise.

    Everything is a deterministic function of ``seed``, so ``fit(…, resume=True)`` re-derives the
    upper layers' inputs exactly and each layer's Trainer resumes from its own checkpoint.
    After the last layer the whole DBN is saved to ``<run_dir>/checkpoint.pt`` (trainer state: the
    layer folders); ``<run_dir>/metrics.jsonl`` holds one line per finished layer (its last epoch's
    metrics with ``"layer": i``). With an ``estimator`` and ``evaluate_every > 0``, the finished DBN's
    held-out (``held_out``; the training rows when there are no held-out rows) log-likelihood is estimated once at the end (needs an exact DBN free energy, i.e.
    ``model.free_energy_cost ≤ max_enumeration_units``; otherwise skipped with a warning). Under a
    ``torch.distributed`` process group each layer's Trainer shards its minibatches across the ranks (see
    :class:`Trainer`) and rank 0 alone writes these files.

    With ``pretrained_layers``, the bottom layers are not trained but taken from trained RBMs (Salakhutdinov & Murray
    2008 stack their DBN on the CD25(500) RBM of their RBM experiments): ``rbms[i]`` gets the parameters of
    ``pretrained_layers[i]`` (a zoo name, :func:`pfzoo.zoo.list_pretrained`, or a checkpoint path) and the data are mapped
    up through it as through a trained layer; its metrics line is ``{"layer": i, "pretrained": <source>}``.

    Args:
        init_from_data: base-rate initialisation of each RBM's visible biases before training it.
        init_from_below: start each trained RBM above the first from the one below it (:func:`start_from_layer_below`;
            needs at least as many hidden units as the layer below has visible units).
        on_layer_end: optional ``callback(layer, metrics)`` after each layer is trained (or taken from a trained RBM).
        pretrained_layers: zoo names or checkpoint paths of trained RBMs for ``rbms[0]``, ``rbms[1]``, …; the rest are
            trained. ``None`` or empty: every layer is trained.
        (the rest): as for :class:`Trainer`; each layer's Trainer shares them, with its own seed and without the
            estimator.
    """

    def __init__(
        self,
        objective: nn.Module,
        optimizer: OptimizerFactory = DEFAULT_OPTIMIZER,
        *,
        init_from_data: bool = True,
        init_from_below: bool = False,
        on_layer_end: Callable[[int, dict[str, Any]], None] | None = None,
        pretrained_layers: Sequence[str | os.PathLike] | None = None,
        callbacks: Sequence[TrainingCallback] = (),
        track_partition: bool | Mapping[str, Any] | None = None,
        **trainer_arguments: Any,
    ) -> None:
        super().__init__(objective, optimizer, callbacks=callbacks, track_partition=track_partition, **trainer_arguments)
        if on_layer_end is not None and not callable(on_layer_end):
            raise ValueError(f"on_layer_end must be callable or None, got {type(on_layer_end).__name__}")
        self.init_from_data = bool(init_from_data)
        self.init_from_below = bool(init_from_below)
        self.on_layer_end = on_layer_end
        self.pretrained_layers = [(str(source), load_model(source, name=f"pretrained_layers[{i}]"))
                                  for i, source in enumerate(_as_sources(pretrained_layers))]
        # each layer's Trainer gets its own tracker built from track_partition; self.callbacks holds this one's
        self.layer_callbacks = list(callbacks)
        self.track_partition = track_partition

    def layer_run_dir(self, layer: int) -> Path:
        """``<run_dir>/layer<i>``: where the Trainer of ``rbms[i]`` keeps its checkpoint and metrics."""
        return self.run_dir / LAYER_DIR.format(layer)

    def layer_trainer(self, layer: int) -> Trainer:
        """The :class:`Trainer` that fits ``rbms[layer]``: these settings with its own seeds and no estimator (it runs
        once, on the whole DBN), a fresh copy of the objective (already centered and wrapped in the natural gradient when
        those are asked for)."""
        return Trainer(
            copy.deepcopy(self.objective),
            self.make_optimizer,
            run_dir=self.layer_run_dir(layer),
            settings=self.settings,
            seed=self.settings.seed + _LAYER_SEED_STRIDE * layer,
            evaluate_every=0,
            epoch_metrics=self.epoch_metrics,
            callbacks=self.layer_callbacks,
            track_partition=self.track_partition,
        )

    def fit(self, model: DBN, data, *, valid=None, resume: bool = False, config: dict | None = None) -> dict[str, Any]:
        """Greedily train every RBM of ``model`` (in place) on the training rows ``[N, V]``; returns flat metrics.

        ``data`` and ``valid`` are what :meth:`Trainer.fit <pfzoo.training.Trainer.fit>` takes (a ``DataSplits``, or a
        tensor, ``Dataset`` or ``DataLoader`` with optional held-out ``valid``), read by the same
        :func:`~pfzoo.training.fit_data.training_data`. The result holds ``epoch`` (epochs per layer), ``layers`` (L),
        ``layer<i>_<metric>`` for each layer's last-epoch metrics, and, when the estimator ran,
        ``<held>_log_likelihood``, ``<held>_log_likelihood_stderr`` and ``log_z``, with ``<held>`` the held-out split's
        name (``valid`` or ``test``; ``train`` without held-out rows).
        """
        require(model, Capability.RBM_STACK, by="greedy layer-wise training")
        self._check_pretrained_layers(model)
        data = training_data(data, valid, held_out=self.settings.held_out)
        # the held-out rows are mapped up the stack too, so each layer's Trainer judges its RBM on the split this fit is judged on
        splits = self._splits(model, data)
        leader = distributed.rank() == 0  # under a process group one rank writes the run directory
        if leader:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.metrics_path.write_text("")
        result: dict[str, Any] = {"epoch": self.settings.epochs, "layers": len(model.rbms)}
        for layer, rbm in enumerate(model.rbms):
            if layer < len(self.pretrained_layers):
                source, trained = self.pretrained_layers[layer]
                with torch.no_grad():
                    rbm.load_state_dict(trained.state_dict())
                logger.info("layer %d/%d: RBM(%d, %d) taken from %s", layer + 1, len(model.rbms), rbm.num_visible, rbm.num_hidden, source)
                metrics = {"pretrained": source}
            else:
                if self.init_from_below and layer > 0:
                    start_from_layer_below(rbm, model.rbms[layer - 1], name=f"init_from_below (layer {layer})")
                elif self.init_from_data:  # with binarize: the base rates of the draw the layer's Trainer fixes for its diagnostics
                    rows = splits["train"]
                    rbm.init_from_data(fixed_draws({"train": rows}, self.settings.seed + _LAYER_SEED_STRIDE * layer)["train"] if self.settings.binarize else rows)
                # only the bottom layer's input is the data's images; the layers above see hidden units
                layer_data = TrainingData(f"{data.name}-layer{layer}", splits["train"], data.held_out_name, splits.get(data.held_out_name),
                                          data.image_shape if layer == 0 else None, data.labels)
                logger.info("greedy training of layer %d/%d: RBM(%d, %d)", layer + 1, len(model.rbms), rbm.num_visible, rbm.num_hidden)
                metrics = self.layer_trainer(layer).fit(rbm, layer_data, resume=resume, config=config)
            if leader:
                with self.metrics_path.open("a") as file:
                    file.write(json.dumps({"layer": layer, **metrics}) + "\n")
            result.update({f"layer{layer}_{key}": value for key, value in metrics.items() if key != "epoch"})
            if self.on_layer_end is not None:
                self.on_layer_end(layer, metrics)
            if layer < len(model.rbms) - 1:
                generator = torch.Generator(model.device).manual_seed(self.settings.seed + _LAYER_SEED_STRIDE * layer + _MAPPING_SEED_OFFSET)
                with torch.no_grad():
                    if self.settings.binarize:  # the next layer draws its rows afresh from the probabilities
                        splits = {name: rbm.hidden_probs(bernoulli(split, generator=generator)) for name, split in splits.items()}
                    else:
                        splits = {name: bernoulli(rbm.hidden_probs(split), generator=generator) for name, split in splits.items()}
        result.update(self._evaluate_dbn(model, data))
        if leader:
            save(model, self.checkpoint_path, config=config, trainer_state={"layer_run_dirs": [LAYER_DIR.format(i) for i in range(len(model.rbms))]})
            logger.info("saved the greedily trained DBN to %s", self.checkpoint_path)
        return result

    def _check_pretrained_layers(self, model: DBN) -> None:
        """Refuse trained RBMs that are more than the stack's layers or not of their layer's class and sizes."""
        if len(self.pretrained_layers) > len(model.rbms):
            raise ValueError(f"pretrained_layers has {len(self.pretrained_layers)} entries but the model has {len(model.rbms)} layers; "
                             f"give at most one trained RBM per layer, bottom first")
        for layer, (source, trained) in enumerate(self.pretrained_layers):
            rbm = model.rbms[layer]
            if type(trained) is not type(rbm) or trained.config() != rbm.config():
                raise ValueError(f"pretrained_layers[{layer}]: {source} is {trained!r}, but layer {layer} of this model is {rbm!r}; "
                                 f"give a trained RBM of that class and size")

    def _evaluate_dbn(self, model: DBN, data: TrainingData) -> dict[str, Any]:
        """The estimator's log-likelihood of the finished DBN on the held-out rows (the training rows without them), when
        configured and affordable."""
        if self.estimator is None or not self.settings.evaluate_every:
            return {}
        if model.free_energy_cost > model.max_enumeration_units:
            logger.warning(
                "skipping the DBN's held-out log-likelihood: its exact free energy would enumerate 2^%d states "
                "(max_enumeration_units=%d)", model.free_energy_cost, model.max_enumeration_units
            )
            return {}
        self.estimator.to(model.device)
        generator = torch.Generator(model.device).manual_seed(self.settings.seed + 2)
        train = data.train.to(device=model.device, dtype=model.dtype)
        held_out_name, held_out = (data.held_out_name, data.held_out) if data.held_out is not None else ("train", data.train)
        estimate = self.estimator.log_likelihood(model, held_out.to(device=model.device, dtype=model.dtype), base_data=train, generator=generator)
        return estimate_record(estimate, held_out_name)


def start_from_layer_below(rbm: nn.Module, below: nn.Module, *, name: str = "rbm") -> None:
    """Set ``rbm`` (``[H_below, H]``, in place) to the RBM ``below`` (``[V, H_below]``) turned upside down (Hinton,
    Osindero & Teh 2006, §4): ``W[:, :V] = W_belowᵀ`` and hidden biases ``[:V]`` = ``below``'s visible biases;
    visible biases = ``below``'s hidden biases; the other ``H − V`` hidden units keep ``rbm``'s own initial weights
    scaled by :data:`EXTRA_UNIT_SCALE`, with zero biases.

    With those extra weights at zero, ``rbm``'s marginal on its visible units is ``below``'s marginal on its hidden
    units, ``p(h) ∝ e^{c·h} Π_j (1 + e^{(W_below h + b)_j})`` (each extra unit multiplies every ``h`` by the same 2), so a
    stack topped by it has exactly the log-likelihood of the stack topped by ``below``, and fitting ``rbm`` to
    ``below``'s posterior samples raises the variational bound from there. The extra weights are small, not zero:
    units that start alike get alike gradients and would stay copies of one another. Needs ``H ≥ V``."""
    if rbm.num_visible != below.num_hidden or rbm.num_hidden < below.num_visible:
        raise ValueError(f"{name}: an RBM({rbm.num_visible}, {rbm.num_hidden}) cannot start as RBM({below.num_visible}, {below.num_hidden}) "
                         f"upside down; it needs {below.num_hidden} visible and at least {below.num_visible} hidden units")
    size = below.num_visible
    with torch.no_grad():
        rbm.weight[:, size:] *= EXTRA_UNIT_SCALE
        rbm.weight[:, :size] = below.weight.T
        rbm.hidden_bias.zero_()
        rbm.hidden_bias[:size] = below.visible_bias
        rbm.visible_bias.copy_(below.hidden_bias)


def _as_sources(pretrained_layers: Sequence[str | os.PathLike] | None) -> list[str | os.PathLike]:
    if pretrained_layers is None:
        return []
    if isinstance(pretrained_layers, (str, os.PathLike)) or not isinstance(pretrained_layers, Sequence):
        raise ValueError(f"pretrained_layers must be a list of zoo names or checkpoint paths (bottom layer first), got {pretrained_layers!r}")
    return list(pretrained_layers)


def train_greedy(
    model: DBN | Sequence[int],
    data,
    *,
    valid=None,
    objective_factory: Callable[[], nn.Module] = lambda: CD(k=1),
    epochs_per_layer: int = 10,
    batch_size: int = 100,
    optimizer: OptimizerFactory = DEFAULT_OPTIMIZER,
    weight_decay: float = 0.0,
    seed: int = 0,
    init_std: float = 0.01,
    init_from_data: bool = True,
    init_from_below: bool = False,
    run_dir: str | os.PathLike | None = None,
    resume: bool = False,
    progress: ProgressCallback | None = None,
    show_progress: bool = False,
) -> DBN:
    """Greedy layer-wise training of a DBN (Hinton, Osindero & Teh 2006, §4); returns the trained DBN.

    Args:
        model: a :class:`~pfzoo.models.DBN` (trained in place), or its ``layer_sizes`` ``[V, H1, …, HL]``
            (then built as ``DBN(layer_sizes, init_std=init_std, generator=Generator().manual_seed(seed))``).
        data, valid: binary data as :meth:`GreedyTrainer.fit` takes it: a :class:`~pfzoo.data.DataSplits`, or the
            training rows (a tensor ``[N, V]``, a ``Dataset`` or a ``DataLoader``) with optional held-out rows ``valid``
            (without them the per-epoch diagnostics read the training rows).
        objective_factory: builds the objective (default CD-1); every layer trains with its own copy.
        epochs_per_layer, batch_size, optimizer, weight_decay: as for :class:`Trainer`.
        seed: root of every random stream (initial weights, data order, Gibbs sampling, mapping up):
            the same seed gives bit-identical parameters.
        init_from_data: base-rate initialisation of each RBM's visible biases before training it.
        init_from_below: start each trained RBM above the first from the one below it (:func:`start_from_layer_below`;
            needs at least as many hidden units as the layer below has visible units).
        run_dir: where the per-layer checkpoints and metrics go (``<run_dir>/layer<i>``) and the DBN's
            ``checkpoint.pt``; ``None`` uses a temporary folder that is deleted afterwards.
        resume: continue an interrupted run in ``run_dir`` (see :class:`GreedyTrainer`).
        progress: optional ``progress(layers_done, num_layers)`` called after each layer.
        show_progress: tqdm bars of the per-layer Trainers.
    """
    if isinstance(model, Sequence):  # layer sizes; anything else is a model, which must declare what greedy training needs
        dbn = DBN(list(model), init_std=init_std, generator=torch.Generator().manual_seed(seed))
    else:
        require(model, Capability.RBM_STACK, by="train_greedy")
        dbn = model
    epochs_per_layer = check_positive_int(epochs_per_layer, "epochs_per_layer")
    if not callable(objective_factory):
        raise ValueError(f"objective_factory must be a callable returning an objective, got {type(objective_factory).__name__}")
    num_layers = len(dbn.rbms)

    def on_layer_end(layer: int, metrics: dict[str, Any]) -> None:
        if progress is not None:
            progress(layer + 1, num_layers)

    def run(directory: str | os.PathLike) -> None:
        trainer = GreedyTrainer(
            objective_factory(),
            optimizer,
            run_dir=directory,
            epochs=epochs_per_layer,
            batch_size=batch_size,
            weight_decay=weight_decay,
            checkpoint_every=epochs_per_layer,
            progress=show_progress,
            seed=seed,
            init_from_data=init_from_data,
            init_from_below=init_from_below,
            on_layer_end=on_layer_end,
        )
        trainer.fit(dbn, data, valid=valid, resume=resume)

    if run_dir is None:
        with tempfile.TemporaryDirectory(prefix="pfzoo-greedy-") as directory:
            run(directory)
    else:
        run(run_dir)
    return dbn
