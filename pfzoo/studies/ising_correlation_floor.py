"""What sets ε_corr of a learned spin glass (issue 52: why does ε_corr rank PT-SML ~500× worse than MPF at a similar ε_J?).

ε_corr (thesis Table 3.1, :func:`pfzoo.studies.ising_recovery.correlation_error`) compares the pair moments
``m_ij = ⟨x_i x_j⟩`` of ``n`` samples of a model with those of the ``N`` training states. Three measurements place a
learner's ε_corr:

- **the sampling floor**: the true glass's own samples. If both samples were independent draws, the expected error
  would be the mean over pairs of ``m_ij (1 − m_ij) (1/n + 1/N)`` (the variance of two Bernoulli means); Gibbs chains'
  correlated draws raise it, so the floor is measured at several ``n`` beside that prediction;
- **ε_J in random directions**: the true couplings moved by independent ``N(0, ε)`` steps on every pair ``i < j`` (so
  ε_J ≈ ε), with the truth's biases kept (each unit's spin field then moves by ``Σ_j E_ij / 4``) or reset to zero field
  ``b = −½ J𝟙`` (the truth's construction); a tiny ε (1e-6) leaves the truth as it is but makes its couplings dense, so
  it is sampled as the learned models are, by single-site sweeps rather than the lattice's two blocks. A learner whose
  ε_corr lies far below these has errors in directions the moments hardly see; far above, errors that ε_J does not
  measure, such as the biases;
- **the learners' error anatomy**: each learned model as it is (several draws: the measurement's own noise), and with
  its own couplings but zero field, and the mean square error of its spin fields ``h = J𝟙/4 + b/2`` (the truth's are 0),
  which ε_J never reads.

Every sample is drawn as :func:`~pfzoo.studies.ising_recovery.recover_spin_glass` draws the learned models' (block-Gibbs,
its chains, burn-in and thinning), each from its own seed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import torch

from pfzoo.data import sample_spin_glass
from pfzoo.models import Ising
from pfzoo.studies.ising_recovery import Compose, correlation_error, coupling_error, pair_moments, training_glass
from pfzoo.validation import check_finite_number, check_positive_int
from pfzoo.zoo import load


def _mean_and_stderr(values: Sequence[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    spread = sum((value - mean) ** 2 for value in values) / (len(values) - 1) if len(values) > 1 else math.nan
    return mean, math.sqrt(spread / len(values))


def sampling_floor(truth: Ising, train: torch.Tensor, sizes: Sequence[int], *, repeats: int, sampling: Mapping,
                   seed: int) -> list[dict]:
    """ε_corr of ``n`` samples of ``truth`` itself against ``train [N, D]`` for each ``n`` of ``sizes``, ``repeats`` draws
    each (seeds ``seed``, ``seed + 1``, ...): rows ``{num_samples, mean, stderr, iid_prediction}``, the last the mean over
    pairs of ``m (1 − m) (1/n + 1/N)`` with ``m`` the training states' pair moments (module docstring)."""
    check_positive_int(repeats, "repeats")
    moments = pair_moments(train.double())
    spread = (moments * (1 - moments)).mean().item()
    rows = []
    for size in sizes:
        errors = [correlation_error(sample_spin_glass(truth, check_positive_int(size, "size"), **sampling,
                                                      generator=torch.Generator().manual_seed(seed + repeat)), train)
                  for repeat in range(repeats)]
        mean, stderr = _mean_and_stderr(errors)
        rows.append({"num_samples": size, "mean": mean, "stderr": stderr, "iid_prediction": spread * (1 / size + 1 / train.shape[0])})
    return rows


def perturbed_glass(truth: Ising, mean_square: float, *, zero_field: bool, generator: torch.Generator) -> Ising:
    """``truth`` with every coupling ``J_ij`` (``i < j``) moved by an independent ``N(0, mean_square)`` step, symmetric, so
    its ε_J is ``mean_square`` in expectation; biases the truth's, or with ``zero_field`` ``b = −½ J𝟙`` of the new J."""
    check_finite_number(mean_square, "mean_square", minimum=0.0)
    coupling = truth.symmetric_coupling.detach()
    step = torch.triu(torch.randn(coupling.shape, generator=generator, dtype=coupling.dtype), 1) * math.sqrt(mean_square)
    moved = coupling + step + step.T
    return Ising.from_tensors(moved, -0.5 * moved.sum(1) if zero_field else truth.bias.detach().clone())


def random_direction_errors(truth: Ising, train: torch.Tensor, mean_squares: Sequence[float], *, directions: int,
                            num_samples: int, sampling: Mapping, seed: int) -> list[dict]:
    """For each ε of ``mean_squares`` and each bias rule (the truth's, zero field), ``directions`` glasses of
    :func:`perturbed_glass` (generator seeded ``seed + k``) and the ε_corr of ``num_samples`` samples of each against
    ``train``: rows ``{mean_square, zero_field, coupling_errors, correlation_errors, mean, stderr}``."""
    check_positive_int(directions, "directions")
    rows = []
    for mean_square in mean_squares:
        for zero_field in (False, True):
            glasses = [perturbed_glass(truth, mean_square, zero_field=zero_field, generator=torch.Generator().manual_seed(seed + k))
                       for k in range(directions)]
            errors = [correlation_error(sample_spin_glass(glass, num_samples, **sampling,
                                                          generator=torch.Generator().manual_seed(seed + 100 + k)), train)
                      for k, glass in enumerate(glasses)]
            mean, stderr = _mean_and_stderr(errors)
            rows.append({"mean_square": mean_square, "zero_field": zero_field,
                         "coupling_errors": [coupling_error(glass, truth) for glass in glasses],
                         "correlation_errors": errors, "mean": mean, "stderr": stderr})
    return rows


def field_error(model: Ising) -> float:
    """Mean square of ``model``'s spin fields ``h = J𝟙/4 + b/2`` (:meth:`Ising.spin_parameters`): its error against a
    zero-field glass."""
    return model.spin_parameters()[1].double().pow(2).mean().item()


def error_anatomy(model: Ising, truth: Ising, train: torch.Tensor, *, num_samples: int, sampling: Mapping, seed: int,
                  repeats: int = 1) -> dict:
    """``model``'s ε_J; its ε_corr from ``repeats`` draws (seeds ``seed``, ``seed + 1``, ...: the spread is the
    measurement's own noise for this model and sampler), their mean and standard error; its ε_corr with its own couplings
    and zero field (``b = −½ J𝟙``, seed ``seed``: common random numbers with the first draw); its field error."""
    check_positive_int(repeats, "repeats")
    coupling = model.symmetric_coupling.detach().double()
    zero_field = Ising.from_tensors(coupling, -0.5 * coupling.sum(1))

    def error(glass: Ising, draw: int) -> float:
        return correlation_error(sample_spin_glass(glass, num_samples, **sampling, generator=torch.Generator().manual_seed(draw)), train)

    errors = [error(model.double(), seed + repeat) for repeat in range(repeats)]
    mean, stderr = _mean_and_stderr(errors)
    return {"coupling_error": coupling_error(model, truth), "correlation_errors": errors, "correlation_error": mean,
            "correlation_error_stderr": stderr, "correlation_error_zero_field": error(zero_field, seed),
            "field_error": field_error(model.double())}


def correlation_floor_study(settings: Mapping, compose: Compose, checkpoints: Mapping[str, Path], *, sizes: Sequence[int],
                            repeats: int, mean_squares: Sequence[float], directions: int, seed: int) -> dict:
    """The three measurements of the module docstring on the glass and training states of a run's ``settings`` (what
    scripts/reproduce_ising.py stored in results.json), for the learned models at ``checkpoints`` (``{learner: path}``);
    ε_corr from ``settings["model_samples"]`` samples except in the floor's size sweep; ``repeats`` draws of the truth
    at each size and of each learned model. results.json's
    ``correlation_floor`` record."""
    truth, train, sampling, _ = training_glass(settings, compose)
    num_samples = settings["model_samples"]
    anatomy = {name: error_anatomy(load(path), truth, train, num_samples=num_samples, sampling=sampling, seed=seed + 300,
                                      repeats=repeats)
               for name, path in checkpoints.items()}
    return {"num_samples": num_samples, "sampling": dict(sampling), "seed": seed,
            "floor": sampling_floor(truth, train, sizes, repeats=repeats, sampling=sampling, seed=seed),
            "random_directions": random_direction_errors(truth, train, mean_squares, directions=directions,
                                                         num_samples=num_samples, sampling=sampling, seed=seed + 200),
            "learners": anatomy, "checkpoints": {name: str(path) for name, path in checkpoints.items()},
            "truth": {"field_error": field_error(truth)}}


def learner_readings(study: Mapping) -> list[str]:
    """One line per learned model of a :func:`correlation_floor_study` record: its ε_corr against that of random
    directions of the nearest ε (both bias rules), and how much of it the zero field removes."""
    lines = []
    for name, row in study["learners"].items():
        nearest = {}
        for direction in study["random_directions"]:
            best = nearest.get(direction["zero_field"])
            if best is None or abs(direction["mean_square"] - row["coupling_error"]) < abs(best["mean_square"] - row["coupling_error"]):
                nearest[direction["zero_field"]] = direction
        against = ", ".join(f"{row['correlation_error'] / direction['mean']:.3g}× that of random directions of ε = "
                            f"{direction['mean_square']:g} with {'zero field' if zero_field else 'the truth’s biases'}"
                            for zero_field, direction in sorted(nearest.items()))
        lines.append(f"- {name}: ε_corr {row['correlation_error']:.2e} at ε_J {row['coupling_error']:.4f}, {against}; with its "
                     f"own couplings and zero field {row['correlation_error_zero_field']:.2e} "
                     f"({row['correlation_error'] / row['correlation_error_zero_field']:.3g}× less).")
    return lines


def against_mpf(study: Mapping) -> str:
    """A paragraph: each learned model's ε_corr as a multiple of MPF's (means over draws), as it is and with zero field,
    and the spread of single draws (what one ε_corr can resolve)."""
    learners = study["learners"]
    if "MPF" not in learners:
        return ""
    mpf = learners["MPF"]
    ratios = "; ".join(f"{name} {row['correlation_error'] / mpf['correlation_error']:.3g}× (own couplings with zero field: "
                       f"{row['correlation_error_zero_field'] / mpf['correlation_error_zero_field']:.3g}×)"
                       for name, row in learners.items() if name != "MPF")
    spreads = "; ".join(f"{name} {min(row['correlation_errors']):.2e} to {max(row['correlation_errors']):.2e}"
                        for name, row in learners.items())
    return (f"ε_corr against MPF's, means over draws: {ratios}. Single draws of one model's samples spread over: {spreads}; "
            "a difference between two learners smaller than that spread is not resolved by one draw each.\n")


def floor_markdown(study: Mapping) -> str:
    """The README section of a :func:`correlation_floor_study` record (with the ``command``, ``date`` and ``load_average``
    of the run that made it)."""
    floor_rows = "\n".join(f"| {row['num_samples']:,} | {row['mean']:.2e} ± {row['stderr']:.1e} | {row['iid_prediction']:.2e} | "
                           f"{row['mean'] / row['iid_prediction']:.2f} |" for row in study["floor"])
    direction_rows = "\n".join(
        f"| {row['mean_square']:g} | {'zero field (b = −½ J𝟙)' if row['zero_field'] else 'the truth’s biases'} | "
        f"{sum(row['coupling_errors']) / len(row['coupling_errors']):.4f} | {row['mean']:.2e} ± {row['stderr']:.1e} |"
        for row in study["random_directions"])
    learner_rows = "\n".join(
        f"| {name} | {row['coupling_error']:.4f} | {row['correlation_error']:.2e} ± {row['correlation_error_stderr']:.1e} | "
        f"{row['correlation_error_zero_field']:.2e} | "
        f"{row['field_error']:.2e} | `{study['checkpoints'][name]}` |" for name, row in study["learners"].items())
    sampling = study["sampling"]
    return (
        "## What sets ε_corr: the sampling floor and ε_J in random directions\n\n"
        f"Made by `{study['command']}` on {study['date']} (load average {study['load_average']}). Samples: block-Gibbs, "
        f"{sampling['num_chains']} chains, burn-in {sampling['burn_in']} sweeps, thinning {sampling['thin']}, as "
        "every learned model's above; ε_corr against the training states.\n\n"
        "The true glass's own samples (the floor), against the prediction for independent draws, mean over pairs of "
        "m(1 − m)(1/n + 1/N):\n\n"
        "| samples n | ε_corr of the truth | independent-draw prediction | ratio |\n|---|---|---|---|\n" + floor_rows + "\n\n"
        f"The true couplings moved in random directions (independent N(0, ε) steps on all pairs i < j), {study['num_samples']:,} "
        "samples each, mean ± standard error over the directions:\n\n"
        "| ε | biases | ε_J | ε_corr |\n|---|---|---|---|\n" + direction_rows + "\n\n"
        "The learned models (their checkpoints): as they are (mean ± standard error over draws of their samples), with their own "
        "couplings and zero field (one draw), and the mean square "
        "error of their spin fields h = J𝟙/4 + b/2 (the truth's are 0; ε_J does not read them):\n\n"
        "| learner | ε_J | ε_corr | ε_corr, own J with zero field | field error | checkpoint |\n|---|---|---|---|---|---|\n"
        + learner_rows + "\n\n" + "\n".join(learner_readings(study)) + "\n\n" + against_mpf(study) + "\n"
    )
