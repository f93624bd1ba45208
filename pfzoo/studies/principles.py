"""The inductive-principles comparison (Marlin, Swersky, Chen & de Freitas 2010, "Inductive principles for restricted
Boltzmann machine learning"; *Deep Learning* §18): RBMs small enough for an exact log-likelihood, trained by every
principle that applies, measured on the same four things.

For each trained RBM (``H`` ≤ 25 hidden units, so ``log Z`` is a sum over ``2^H`` hidden states):

* **exact test log-likelihood** — ``mean log p(v)`` over the test set, ``log Z`` by enumeration;
* **denoising** — in every test image a random ``block × block`` square of pixels is hidden and filled in by the
  model's conditionals: mean-field iterations ``v_miss ← σ(W σ(vW + c) + b)_miss`` with the observed pixels clamped,
  starting from the training set's pixel means; the error is the mean squared difference from the true pixels over the
  hidden ones (Marlin et al. measure denoising the same way, by the model's reconstruction of corrupted pixels);
* **classification** — logistic regression (scikit-learn, L2, ``C = 1``) on the hidden units' probabilities
  ``p(h = 1 | v)`` of the training set, accuracy on the test set;
* **training time** — the Trainer's seconds (evaluation excluded).

A principle's *setting* (learning rate and the like) is chosen by a small grid search on a validation split carved
from the training set, by exact validation log-likelihood; every point of the search is kept for the report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from pfzoo.data import DataSplits
from pfzoo.models import RBM
from pfzoo.pictures import save_labelled_grids
from pfzoo.sampling import randint
from pfzoo.studies.features import hidden_features, linear_accuracy

@dataclass(frozen=True)
class Principle:
    """One row of the table: a ``conf/trainer`` option with its objective's settings, the optimizer (``"SGD"`` with
    momentum 0.5, as for every principle whose loss has a minimum, or ``"Adam"``) and the learning rates searched.
    ``early_stopping_every``: score the validation split every this many updates and keep the best model
    (:class:`~pfzoo.training.EarlyStopping`; the final run on the whole training set stops at the same update), for
    a loss with no minimum on a finite sample (GSM); None: train the recipe's epochs. ``small_only``: too slow for
    the large data set (naive MCMC)."""

    name: str
    trainer: str
    overrides: tuple[str, ...] = ()
    learning_rates: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3)
    optimizer: str = "SGD"
    early_stopping_every: int | None = None
    small_only: bool = False


PRINCIPLES = (
    Principle("CD-1", "cd", ("trainer.objective.k=1",)),
    Principle("PCD (SML)", "pcd", ("trainer.objective.k=1", "trainer.objective.num_chains=100")),
    Principle("PT (SML)", "pt", ("trainer.objective.num_replicas=10",)),
    Principle("FPCD", "fpcd"),
    Principle("pseudolikelihood", "pseudolikelihood", ("trainer.objective.num_units=null",)),
    Principle("generalized PL", "generalized_pseudolikelihood", ("trainer.objective.sets=patches", "trainer.objective.size=2")),
    Principle("ratio matching", "ratio_matching", ("trainer.objective.num_units=null",)),
    Principle("MPF", "mpf_sgd", ("trainer.objective.binary.num_flips=null",)),
    Principle("NCE", "nce", ("trainer.objective.noise_ratio=10",)),
    Principle("self-contrastive", "self_contrastive"),
    # GSM's loss falls without bound on a finite sample (pfzoo/training/generalized_score_matching.py): SGD turns it
    # non-finite within a few updates at every rate from 1e-4 up, and any fixed number of epochs ends far below the
    # start; Adam's normalised steps and early stopping on the validation split give the best model it passes through.
    Principle("GSM", "generalized_score_matching", learning_rates=(1e-4, 3e-4, 1e-3, 3e-3), optimizer="Adam",
              early_stopping_every=10),
    Principle("naive MCMC", "naive_mcmc", ("trainer.objective.burn_in=100",), small_only=True),
)
"""Every principle of the table, in the report's order."""

MARLIN_ORDERINGS = {
    "test log-likelihood": "SML (PCD) best",
    "classification": "SML (PCD) best",
    "denoising": "ratio matching best",
}
"""What Marlin et al. (2010) report, as *Deep Learning* §18 summarises it: stochastic maximum likelihood gives the best
test log-likelihood and the best features for a classifier, ratio matching the best denoising."""


@dataclass
class PrincipleResult:
    """One trained RBM's measurements; ``search`` holds every grid point tried (its overrides and validation
    log-likelihood). A principle whose loss turned non-finite at every setting searched has ``failure`` (why, in
    words) and no measurements. ``optimizer`` names the optimizer; ``updates``, for an early-stopped principle, is
    the update count its measured model was taken at (0: the starting model)."""

    name: str
    recipe: str
    overrides: list[str]
    test_log_likelihood: float | None
    denoising_error: float | None
    classification_accuracy: float | None
    train_seconds: float | None
    search: list[dict[str, Any]] = field(default_factory=list)
    failure: str | None = None
    optimizer: str = "SGD"
    updates: int | None = None

    def row(self) -> dict[str, Any]:
        return dict(self.__dict__)


@torch.no_grad()
def exact_log_likelihood(model: RBM, data: torch.Tensor) -> float:
    """``mean log p(v)`` over ``data [N, V]``, exactly (``log Z`` by enumerating the smaller layer)."""
    return float(model.log_prob(data.to(model.dtype)).mean())


def hidden_blocks(num_images: int, image_shape: tuple[int, int], block: int, generator: torch.Generator) -> torch.Tensor:
    """A mask ``[N, H·W]`` (bool) hiding one random ``block × block`` square per image."""
    height, width = image_shape
    if not 1 <= block <= min(height, width):
        raise ValueError(f"block must be between 1 and the image's smaller side {min(height, width)}, got {block}")
    tops = randint(height - block + 1, (num_images,), generator=generator)
    lefts = randint(width - block + 1, (num_images,), generator=generator)
    rows = torch.arange(height)[None, :, None]
    cols = torch.arange(width)[None, None, :]
    inside = (rows >= tops[:, None, None]) & (rows < tops[:, None, None] + block) & (cols >= lefts[:, None, None]) & (cols < lefts[:, None, None] + block)
    return inside.reshape(num_images, height * width)


@torch.no_grad()
def denoising_error(model: RBM, test: torch.Tensor, fill: torch.Tensor, image_shape: tuple[int, int], *, block: int,
                    generator: torch.Generator, iterations: int = 50) -> float:
    """Mean squared error of the model's fill-in of a hidden ``block × block`` square per image of ``test [N, V]``
    (module docstring); ``fill [V]`` starts the hidden pixels (the training set's pixel means)."""
    mask = hidden_blocks(test.shape[0], image_shape, block, generator).to(test.device)
    test = test.to(model.dtype)
    v = torch.where(mask, fill.to(model.dtype), test)
    for _ in range(iterations):
        v = torch.where(mask, model.reconstruct(v), test)
    return float(((v - test)[mask]).pow(2).mean())


def classification_accuracy(model: RBM, data: DataSplits) -> float | None:
    """Test accuracy of logistic regression on ``p(h = 1 | v)`` of the training set; ``None`` without labels."""
    if not data.labelled:
        return None
    train, test = hidden_features(model, data.train), hidden_features(model, data.test)
    return linear_accuracy(train, data.train_labels, test, data.test_labels, C=1.0, max_iter=2000)[0]


def validation_split(data: DataSplits, fraction: float, generator: torch.Generator) -> DataSplits:
    """``data`` with a random ``fraction`` of its training rows as the test split (labels kept alongside), for the
    search; the real test split is not touched."""
    order = torch.randperm(data.train.shape[0], generator=generator)
    cut = max(1, round(fraction * len(order)))
    held, kept = order[:cut], order[cut:]
    labels = data.train_labels
    return DataSplits(f"{data.name}-validation", data.train[kept], data.train[held], image_shape=data.image_shape,
                      train_labels=None if labels is None else labels[kept], test_labels=None if labels is None else labels[held])


Train = Callable[[list[str], DataSplits], tuple[RBM, float, dict[str, Any]]]
"""``train(overrides, data) -> (model, training seconds, details)``: one run of a principle's recipe with extra
overrides; ``details`` (e.g. the early-stopped update, ``{"updates": 40}``) joins the search's record of the point."""


def search_setting(train: Train, grid: Sequence[list[str]], data: DataSplits) -> tuple[list[str] | None, list[dict[str, Any]]]:
    """The grid point (a list of overrides) with the best exact log-likelihood on ``data.test`` (a validation split),
    and every point's record (with the training's ``details``); a point whose training fails numerically (NaN) or
    whose model's log-likelihood is not finite scores −∞, and when every point does the best is ``None``."""
    records = []
    for overrides in grid:
        details: dict[str, Any] = {}
        try:
            model, seconds, details = train(list(overrides), data)
            score = exact_log_likelihood(model, data.test)
        except FloatingPointError:
            score, seconds = -math.inf, float("nan")
        score = score if math.isfinite(score) else -math.inf
        records.append({"overrides": list(overrides), "validation_log_likelihood": score, "train_seconds": seconds, **details})
    best = max(records, key=lambda record: record["validation_log_likelihood"])
    return (None if best["validation_log_likelihood"] == -math.inf else best["overrides"]), records


def measure(name: str, recipe: str, overrides: list[str], model: RBM, seconds: float, data: DataSplits, *, block: int, seed: int,
            search: list[dict[str, Any]], optimizer: str = "SGD", updates: int | None = None) -> PrincipleResult:
    """The four measurements of a trained RBM (module docstring); ``optimizer`` and ``updates`` are recorded as
    :class:`PrincipleResult` says."""
    if data.image_shape is None or len(data.image_shape) != 2:
        raise ValueError(f"data must be images (image_shape of 2 sides) for the denoising column, got {data.image_shape}")
    generator = torch.Generator().manual_seed(seed)
    fill = data.train.mean(0)
    return PrincipleResult(
        name=name, recipe=recipe, overrides=overrides,
        test_log_likelihood=exact_log_likelihood(model, data.test),
        denoising_error=denoising_error(model, data.test, fill, data.image_shape, block=block, generator=generator),
        classification_accuracy=classification_accuracy(model, data),
        train_seconds=seconds, search=search, optimizer=optimizer, updates=updates,
    )


def failed(name: str, recipe: str, search: list[dict[str, Any]]) -> PrincipleResult:
    """The row of a principle whose loss turned non-finite at every setting searched."""
    tried = ", ".join(" ".join(point["overrides"]) for point in search)
    return PrincipleResult(name=name, recipe=recipe, overrides=[], test_log_likelihood=None, denoising_error=None,
                           classification_accuracy=None, train_seconds=None, search=search,
                           failure=f"the loss turned non-finite at every setting tried ({tried})")


def orderings(results: Sequence[PrincipleResult]) -> dict[str, list[str]]:
    """The principles from best to worst on each column (log-likelihood and accuracy high, denoising error low)."""
    def ranked(key: Callable[[PrincipleResult], float | None], reverse: bool) -> list[str]:
        scored = [result for result in results if result.failure is None and key(result) is not None]
        return [result.name for result in sorted(scored, key=key, reverse=reverse)]

    return {
        "test log-likelihood": ranked(lambda r: r.test_log_likelihood, True),
        "classification": ranked(lambda r: r.classification_accuracy, True),
        "denoising": ranked(lambda r: r.denoising_error, False),
    }


def table(results: Sequence[PrincipleResult]) -> list[str]:
    """The report's markdown table, one row per principle."""
    lines = ["| principle | setting (best of the search) | exact test log-likelihood (nats) | denoising MSE | classification accuracy | training s |",
             "|---|---|---:|---:|---:|---:|"]
    for r in results:
        if r.failure is not None:
            lines.append(f"| {r.name} | {r.failure} | — | — | — | — |")
            continue
        accuracy = "—" if r.classification_accuracy is None else f"{r.classification_accuracy:.4f}"
        setting = ", ".join(f"`{o}`" for o in r.overrides) or "recipe as is"
        if r.optimizer != "SGD":
            setting += f" ({r.optimizer})"
        if r.updates is not None:
            setting += f", early-stopped at update {r.updates}" + (" (the starting model)" if r.updates == 0 else "")
        lines.append(f"| {r.name} | {setting} | {r.test_log_likelihood:.2f} | {r.denoising_error:.4f} | {accuracy} | {r.train_seconds:.1f} |")
    return lines


@torch.no_grad()
def gibbs_samples(model: RBM, count: int, *, sweeps: int, seed: int) -> torch.Tensor:
    """``count`` samples ``[count, V]`` of the model's own block-Gibbs chain after ``sweeps`` sweeps from random states."""
    return model.sample(count, num_steps=sweeps, generator=torch.Generator(model.device).manual_seed(seed))


def samples_figure(samples: dict[str, torch.Tensor], image_shape: tuple[int, ...], path) -> None:
    """One panel of samples per principle (:func:`~pfzoo.pictures.save_labelled_grids`)."""
    save_labelled_grids(samples, image_shape, path)


def readme(payload: dict[str, Any]) -> str:
    """The report: per data set, the table, the orderings beside Marlin et al.'s, and the search; then the machine."""
    lines = ["# Inductive principles for RBM learning", "",
             "Small RBMs (exact log-likelihood by enumerating the hidden layer) trained by every principle pfzoo has, "
             "after Marlin, Swersky, Chen & de Freitas (2010) and *Deep Learning* §18. Regenerate with "
             "`python scripts/reproduce_principles.py` (recipes `conf/experiment/principles_*.yaml`; "
             "`pfzoo/studies/principles.py` says how each column is measured).", ""]
    if payload.get("quick"):
        lines += ["**Smoke run (`--quick`): 2 epochs, one learning rate — the numbers mean nothing.**", ""]
    for part in payload["datasets"]:
        results = [PrincipleResult(**row) for row in part["results"]]
        lines += [f"## {part['dataset']}: {part['train'][1]} visible × {part['hidden']} hidden units", "",
                  f"{part['train'][0]} training and {part['test'][0]} test examples, {part['epochs']} epochs of SGD (momentum 0.5, "
                  f"minibatches of 100), learning rate searched on a validation fifth of the training set; denoising hides a "
                  f"{part['block']}×{part['block']} square per test image. Samples: `samples_{part['dataset']}.png`.", ""]
        if any(result.updates is not None for result in results):
            lines += ["A row marked *early-stopped* has a loss with no minimum on a finite sample (GSM: "
                      "`pfzoo/training/generalized_score_matching.py`): it is trained with Adam, its validation "
                      "log-likelihood scored every few updates during the search, and the final run on the whole training "
                      "set stops at the update where the chosen setting's validation score was best. A stop within the "
                      "first few updates means the principle never improved on the starting model every row shares (the "
                      "training set's base rates), the failure *Deep Learning* §18.4.1 reports for GSM on high-dimensional "
                      "binary data.", ""]
        lines += table(results) + [""]
        lines += ["| column | pfzoo, best to worst | Marlin et al. (2010) |", "|---|---|---|"]
        for column, ranked in orderings(results).items():
            lines.append(f"| {column} | {' > '.join(ranked) if ranked else '—'} | {MARLIN_ORDERINGS[column]} |")
        lines += ["", "<details><summary>The search (validation log-likelihood per setting)</summary>", ""]
        for result in results:
            points = ", ".join(f"{' '.join(p['overrides'])}: {p['validation_log_likelihood']:.2f}"
                               + (f" (best at update {p['updates']} of {p['updates_run']})" if "updates" in p else "")
                               for p in result.search)
            lines.append(f"- {result.name}: {points}")
        lines += ["", "</details>", ""]
    # a report merged from runs of one data set each lists each run's measurement (``runs``); a single run is the payload
    for run in payload.get("runs", [payload]):
        names = f" ({', '.join(run['names'])})" if "names" in run else ""
        lines += [f"Measured{names} {run['date']} on {run['machine']}, {run['threads']} thread(s) "
                  f"(load average at the end {run['load_average']}); {run['seconds'] / 60:.1f} minutes for the whole invocation "
                  f"(training an earlier invocation finished is resumed from `runs/principles/`, not repeated; each row's "
                  f"training s is its own).", ""]
    return "\n".join(lines)
