"""Steepest descent against the natural gradient (:mod:`pfzoo.training.natural_gradient`) on two problems, after
Fig. 4.1 of Sohl-Dickstein's thesis (chapter 4, "the natural gradient by analogy to signal whitening"):

- :func:`figure_4_1`: the chapter's badly parametrised two-parameter model, a unit-covariance 2-D Gaussian whose mean
  is ``Aθ`` with ``A = [[3, ⅓], [⅓, 0]]``, fitted by maximum likelihood to data of ``θ*``. Its objective (the data's
  expected negative log-likelihood, exact) is ``J(θ) = ½‖A(θ − θ*)‖² + const`` and ``KL(p_θ* ‖ p_θ)`` is that
  quadratic; the Fisher ``G = AᵀA`` has condition number ≈ 7·10³, so steepest descent zig-zags across the valley while
  the natural gradient ``G⁻¹∇J = θ − θ*`` points straight at the optimum.
- :func:`ica_race`: complete ICA with Laplace sources (:class:`~pfzoo.models.ICA`) trained by exact maximum likelihood
  (trainer ``ml``'s objective, with SGD) by the :class:`~pfzoo.training.Trainer` on samples of a known ICA model with a
  badly conditioned mixing matrix, plain against natural gradient (``relative``: Amari's ``ΔW WᵀW``; ``model_fisher``:
  the sampled Fisher; ``data_fisher``: the empirical Fisher; ``energy``: the energy approximation).

Each method runs at every rate of a small grid; a method's score is the fewest steps, over its grid, to reach the
stated KL. Everything is deterministic given the seed.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Callable
from pathlib import Path

import torch

from pfzoo.data import DataSplits
from pfzoo.models.gaussian import Gaussian
from pfzoo.models.ica import ICA
from pfzoo.training import ExactMaximumLikelihood, Trainer
from pfzoo.training.natural_gradient import energy_gradients, laplace_ica_fisher, linear_gaussian_fisher, precondition_direction

FIGURE_DESIGN = ((3.0, 1.0 / 3.0), (1.0 / 3.0, 0.0))


@dataclass
class Race:
    """One method's runs over its rate grid: ``steps[lr]`` to reach ``target`` (None: not within ``max_steps``),
    and the best rate's KL trace ``[[step, KL], ...]`` (step 0: before the first) and, for 2-D problems, its parameter
    path ``[[step, θ₁, θ₂], ...]``; long traces are thinned (:func:`thin`)."""

    method: str
    target: float
    max_steps: int
    steps: dict[str, int | None]
    best_lr: float | None
    best_steps: int | None
    kl: list[float] = field(default_factory=list)
    path: list[list[float]] = field(default_factory=list)


def thin(values: list, *, head: int = 100, every: int = 25) -> list[list[float]]:
    """``[[step, *value], ...]``: every step of the first ``head``, then every ``every``-th, and the last."""
    kept = [step for step in range(len(values)) if step < head or step % every == 0 or step == len(values) - 1]
    return [[step, *(values[step] if isinstance(values[step], list) else [values[step]])] for step in kept]


def _best(steps: dict[str, int | None]) -> tuple[float | None, int | None]:
    reached = [(count, float(lr)) for lr, count in steps.items() if count is not None]
    if not reached:
        return None, None
    count, lr = min(reached)
    return lr, count


def figure_4_1(
    *, start: tuple[float, float] = (-2.0, 10.0), optimum: tuple[float, float] = (0.0, 0.0), target: float = 1e-3,
    max_steps: int = 40000, rates: dict[str, tuple[float, ...]] | None = None, damping: float = 0.0,
) -> dict[str, Race]:
    """Steepest descent ``θ ← θ − η ∇J`` and natural descent ``θ ← θ − η (G + λI)⁻¹ ∇J`` (``G = AᵀA``, closed form)
    on the Fig. 4.1 model from ``start``, each at every rate of ``rates[method]``; returns ``{method: Race}`` with the
    steps to ``KL ≤ target`` (nats) and the best rate's path ``[[θ₁, θ₂], ...]`` and KL trace."""
    rates = rates or {"steepest": (0.02, 0.05, 0.1, 0.2, 0.21, 0.216), "natural": (0.1, 0.3, 0.5, 1.0)}
    design = torch.tensor(FIGURE_DESIGN, dtype=torch.float64)
    fisher = linear_gaussian_fisher(design)
    optimum_ = torch.tensor(optimum, dtype=torch.float64)

    def run(method: str, lr: float, steps: int) -> tuple[int | None, list[float], list[list[float]]]:
        theta = torch.tensor(start, dtype=torch.float64)
        kls, path, reached = [], [theta.tolist()], None
        for step in range(steps + 1):
            error = theta - optimum_
            kl = 0.5 * float(error @ fisher @ error)
            kls.append(kl)
            if kl <= target:
                reached = step
                break
            if step == steps or not math.isfinite(kl):
                break
            gradient = fisher @ error  # ∇J = Aᵀ(Aθ − Aθ*)
            if method == "natural":
                gradient = precondition_direction(gradient, fisher, damping=damping)
            theta = theta - lr * gradient
            path.append(theta.tolist())
        return reached, kls, path

    races = {}
    for method, grid in rates.items():
        steps = {str(lr): run(method, lr, max_steps)[0] for lr in grid}
        best_lr, best_steps = _best(steps)
        race = Race(method, target, max_steps, steps, best_lr, best_steps)
        if best_lr is not None:
            _, kls, path = run(method, best_lr, best_steps)
            race.kl, race.path = thin(kls), thin(path)
        races[method] = race
    return races


def random_mixing(size: int, condition: float, *, generator: torch.Generator) -> torch.Tensor:
    """A mixing matrix ``[size, size]`` ``Q₁ diag(s) Q₂`` with Haar orthogonal ``Q``'s and singular values ``s``
    geometrically spaced from ``condition^-½`` to ``condition^½`` (so the data keep unit scale overall)."""
    q1, _ = torch.linalg.qr(torch.randn(size, size, generator=generator, dtype=torch.float64))
    q2, _ = torch.linalg.qr(torch.randn(size, size, generator=generator, dtype=torch.float64))
    singular = torch.logspace(-0.5 * math.log10(condition), 0.5 * math.log10(condition), size, dtype=torch.float64)
    return q1 @ torch.diag(singular) @ q2


def ica_problem(size: int, condition: float, num_train: int, num_test: int, seed: int) -> tuple[DataSplits, Callable[[ICA], float]]:
    """The ICA races' problem: a complete Laplace ICA truth with a :func:`random_mixing` of ``condition``, ``num_train``
    training samples (the ``DataSplits``; its test split, 10 rows, is only the Trainer's closing check) and
    ``kl(model)``, KL ``(p* ‖ p_W)`` as the mean of ``log p*(x) − log p_W(x)`` over ``num_test`` fixed samples of the
    truth (common random numbers: its Monte-Carlo error shifts every run alike)."""
    generator = torch.Generator().manual_seed(seed)
    truth = ICA.from_tensors(torch.linalg.inv(random_mixing(size, condition, generator=generator)))
    train, test = truth.sample(num_train, generator=generator), truth.sample(num_test, generator=generator)
    with torch.no_grad():
        truth_log_prob = truth.log_prob(test).mean().item()

    def kl(model: ICA) -> float:
        return truth_log_prob - model.log_prob(test).mean().item()

    return DataSplits("ica", train=train, test=test[:10]), kl


def ica_race(
    *, size: int = 3, condition: float = 10.0, num_train: int = 4000, num_test: int = 20000, target: float = 0.01,
    max_steps: int = 300, rates: dict[str, tuple[float, ...]] | None = None, damping: float = 1e-3,
    num_samples: int = 400, seed: int = 0, run_dir: str | Path,
) -> dict[str, Race]:
    """Exact-ML ICA by the Trainer, full batch, one SGD step per epoch, plain (``gradient``) against natural
    (``relative``, ``model_fisher``, ``data_fisher``, ``energy``; see :mod:`pfzoo.training.natural_gradient`) at each
    rate of ``rates[method]``. KL ``(p* ‖ p_W)`` is the mean of
    ``log p*(x) − log p_W(x)`` over ``num_test`` fixed samples of the truth (common random numbers: its Monte-Carlo
    error shifts every run alike). Returns ``{method: Race}`` with steps to ``KL ≤ target``."""
    natural = (0.1, 0.3, 0.5, 0.7, 1.0)
    rates = rates or {"gradient": (0.01, 0.03, 0.05, 0.1, 0.15, 0.2, 0.3), "relative": natural, "model_fisher": natural,
                      "data_fisher": natural, "energy": natural}
    data, kl = ica_problem(size, condition, num_train, num_test, seed)

    def run(method: str, lr: float) -> tuple[int | None, list[float]]:
        model = ICA(size, generator=torch.Generator().manual_seed(seed + 1)).double()
        settings = None if method == "gradient" else {"metric": method, "damping": damping, "num_samples": num_samples}
        trainer = Trainer(ExactMaximumLikelihood(), lambda params: torch.optim.SGD(params, lr=lr),
                          run_dir=Path(run_dir) / f"{method}_{lr}", epochs=max_steps, batch_size=num_train,
                          checkpoint_every=max_steps, progress=False, seed=seed, epoch_metrics={"kl": kl},
                          natural_gradient=settings, log_every=max_steps)
        trace = [kl(model)]
        try:
            trainer.fit(model, data)
        except (FloatingPointError, ValueError):  # a rate too large for the method: it diverged
            pass
        trace += [json.loads(line)["kl"] for line in trainer.metrics_path.read_text().splitlines()]
        reached = next((step for step, value in enumerate(trace) if value <= target), None)
        return reached, trace

    races = {}
    for method, grid in rates.items():
        traces = {str(lr): run(method, lr) for lr in grid}
        steps = {lr: reached for lr, (reached, _) in traces.items()}
        best_lr, best_steps = _best(steps)
        race = Race(method, target, max_steps, steps, best_lr, best_steps)
        if best_lr is not None:
            race.kl = thin(traces[str(best_lr)][1])
        races[method] = race
    return races


def fisher_z_scores(gradients: torch.Tensor, closed_form: torch.Tensor) -> torch.Tensor:
    """``|Ĝ − G| / se`` per entry ``[P, P]`` for the sample Fisher ``Ĝ = Cov(gradients [N, P])`` against ``closed_form
    G``, ``se`` the Monte-Carlo standard error of each entry (of the mean of ``c_i c_j``, ``c`` the centred rows);
    entries without spread (unused parameters) must agree exactly and score 0 or ``inf``."""
    centered = gradients - gradients.mean(0)
    products = centered[:, :, None] * centered[:, None, :]
    estimate, stderr = products.mean(0), products.std(0) / math.sqrt(gradients.shape[0])
    gap = (estimate - closed_form).abs()
    exact = stderr == 0
    return torch.where(exact, torch.where(gap < 1e-12, 0.0, math.inf), gap / stderr.clamp_min(1e-300))


def fisher_checks(*, num_samples: int = 20000, seed: int = 0) -> dict[str, float]:
    """The largest z-score (:func:`fisher_z_scores`) of the model Fisher estimated from ``num_samples`` of the model's
    own samples against its closed form: ``ica`` — a 3-D Laplace ICA at a random W (:func:`laplace_ica_fisher`);
    ``gaussian_mean`` — a 3-D :class:`~pfzoo.models.Gaussian`'s block of the mean ``μ`` (closed form: ``Λ``) and its
    cross block with the precision's log-Cholesky factor (closed form: 0, odd moments)."""
    generator = torch.Generator().manual_seed(seed)
    ica = ICA.from_tensors(random_mixing(3, 4.0, generator=generator))
    scores = {"ica": fisher_z_scores(energy_gradients(ica, ica.sample(num_samples, generator=generator)),
                                     laplace_ica_fisher(ica.filters.detach())).max().item()}
    precision = random_mixing(3, 4.0, generator=generator)
    gaussian = Gaussian.from_tensors(precision @ precision.T, torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64))
    gradients = energy_gradients(gaussian, gaussian.sample(num_samples, generator=generator))
    closed = torch.zeros(gradients.shape[1], gradients.shape[1], dtype=torch.float64)
    closed[:3, :3] = gaussian.precision.detach()
    scores["gaussian_mean"] = fisher_z_scores(gradients, closed)[:3].max().item()
    return scores


def as_json(races: dict[str, Race]) -> dict:
    """``races`` as plain JSON data."""
    return {method: asdict(race) for method, race in races.items()}
