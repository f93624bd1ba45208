"""The training cases: optimizer steps per second of the training principles, each step a loss, its backward and an
optimizer step as the Trainer takes them.

PCD-1 training of a 784×500 RBM (``rbm_pcd``): :class:`pfzoo.training.PCD` with 100 persistent chains and SGD
(the ``trainer=pcd`` settings) on minibatches of 100, 500 optimizer steps (one epoch of binarized MNIST's 50,000
training digits; random binary digits here): optimizer steps per second and examples per second.

The same training steps for the sampler-based principles beside PCD: PT-SML (``rbm_pt``, 10 replicas of the 100 chains on
a geometric ladder from β = 0.1, advanced as one batch, one exchange round per update), FPCD-1 (``rbm_fpcd``) and naive
MCMC (``rbm_naive_mcmc``, 100 fresh chains burned in 100 Gibbs steps per update): steps and examples per second each.
NCE and self-contrastive training of the same 784×500 RBM (``rbm_nce``, ``rbm_self_contrastive``): optimizer steps and
examples per second under the ``trainer=nce`` settings (ν = 10 fresh base-rate noise draws per example, SGD with the
normaliser c) and the ``trainer=self_contrastive`` ones (100 persistent chains of the frozen copy, one Gibbs sweep per
update), on the same minibatches as ``rbm_pcd``; the noise is fitted and the copy frozen before the clock starts.

The same training steps for the bit-flip and conditional principles: ratio matching over all 784 single flips
(``rbm_ratio_matching``) and over 50 importance-sampled units per example, half of the draws on its ones
(``rbm_stochastic_ratio_matching``), generalized score matching (``rbm_generalized_score_matching``) and generalized
pseudo-likelihood over blocks of 4 pixels, each block's 16 configurations enumerated (``rbm_generalized_pseudolikelihood``,
a ``[B, 196, 16, 500]`` tensor of hidden inputs per step): steps and examples per second each.

MPF on a 784×500 RBM (``rbm_mpf``): examples per second of ``BitFlipMPF`` loss + backward on minibatches
of 100, summing all 784 single flips and sampling 50 of them.

Score matching on the complete 36-d Student-t product of experts of ``poe_hais``, fitted to minibatches of 500 of its own
exact samples with Adam (the ``trainer=score_matching`` family's settings): score matching with the model's analytic
score and Laplacian (``poe_score_matching``; ``analytic=False`` times autograd's 36 backward passes instead), denoising
score matching at σ = 0.1 (``poe_denoising_score_matching``) and sliced score matching with one Rademacher direction
(``poe_sliced_score_matching``), and NCE with ν = 10 draws of the fitted base per example (``poe_nce``): steps and
examples per second each.
"""

from __future__ import annotations

import torch

from pfzoo.studies.benchmark.timing import best_seconds
from pfzoo.studies.benchmark.workloads import random_rbm, student_t_poe
from pfzoo.training import (
    FPCD,
    NCE,
    PCD,
    PT,
    BitFlipMPF,
    DenoisingScoreMatching,
    GeneralizedPseudoLikelihood,
    GeneralizedScoreMatching,
    NaiveMCMC,
    RatioMatching,
    ScoreMatching,
    SelfContrastive,
    SlicedScoreMatching,
)
from pfzoo.validation import values_checked


def benchmark_rbm_mpf(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_flips=50, repeats=3) -> dict:
    """BitFlipMPF loss + backward on one random binary minibatch ``[B, V]`` of the benchmarks' RBM: every single flip, and
    ``num_flips`` sampled flips per example."""
    g = torch.Generator(device).manual_seed(0)
    model = random_rbm(num_visible, num_hidden, g, device)
    batch = (torch.rand(batch_size, num_visible, generator=g, device=device) < 0.2).float()
    results = {}
    for label, objective in (("all_flips", BitFlipMPF()), (f"num_flips_{num_flips}", BitFlipMPF(num_flips=num_flips))):

        def loss_and_backward():
            model.zero_grad(set_to_none=True)
            objective.loss(model, batch, generator=g).backward()

        seconds = best_seconds(loss_and_backward, device, repeats)
        results[label] = {"seconds_per_batch": seconds, "examples_per_second": batch_size / seconds}
    return {
        "name": "rbm_mpf",
        "shape": {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size, "num_flips": num_flips},
        **results,
    }


def training_steps(objective, device: torch.device, num_visible: int, num_hidden: int, batch_size: int, num_batches: int,
                   repeats: int) -> float:
    """Best seconds of ``num_batches`` optimizer steps (loss, backward, SGD step with the ``trainer=pcd`` settings over the
    model's and the objective's own parameters, as the Trainer builds it) of ``objective`` on the benchmarks' RBM, cycling
    through 10 random binary minibatches, after the objective's ``prepare`` on all of them (NCE fits its noise there), with
    the batches' value checks skipped as in the Trainer's steps (they were checked once, as the Trainer checks its data
    splits)."""
    g = torch.Generator(device).manual_seed(0)
    model = random_rbm(num_visible, num_hidden, g, device)
    batches = (torch.rand(10, batch_size, num_visible, generator=g, device=device) < 0.2).float()
    objective = objective.to(device)
    model.check_visible(batches.flatten(0, 1), "batches")
    objective.prepare(model, batches.flatten(0, 1), generator=g)
    optimizer = torch.optim.SGD([*model.parameters(), *objective.parameters()], lr=0.05, momentum=0.5)  # conf/trainer/pcd.yaml
    return best_seconds(lambda: optimizer_steps(model, objective, optimizer, batches, num_batches, g), device, repeats)


def optimizer_steps(model, objective, optimizer: torch.optim.Optimizer, batches: torch.Tensor, num_batches: int, generator: torch.Generator) -> None:
    """``num_batches`` steps (loss, backward, optimizer step) of ``objective`` cycling through ``batches [n, B, V]``, the
    value checks skipped as in the Trainer's steps."""
    for step in range(num_batches):
        optimizer.zero_grad(set_to_none=True)
        with values_checked():
            objective.loss(model, batches[step % len(batches)], generator=generator).backward()
        optimizer.step()


def training_rates(name: str, shape: dict, seconds: float) -> dict:
    """A training case's result: its ``shape`` (``num_batches`` and ``batch_size`` among it), seconds, optimizer steps
    per second and examples per second."""
    return {
        "name": name,
        "shape": shape,
        "seconds": seconds,
        "steps_per_second": shape["num_batches"] / seconds,
        "examples_per_second": shape["num_batches"] * shape["batch_size"] / seconds,
    }


def benchmark_rbm_pcd(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500, k=1, num_chains=100,
                      repeats=2) -> dict:
    """``num_batches`` PCD-k optimizer steps (:func:`training_steps`)."""
    seconds = training_steps(PCD(k=k, num_chains=num_chains), device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_pcd", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                      "num_batches": num_batches, "k": k, "num_chains": num_chains}, seconds)


def benchmark_rbm_pt(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500, k=1, num_chains=100,
                     num_replicas=10, repeats=2) -> dict:
    """``num_batches`` PT-SML optimizer steps (:func:`training_steps`): ``num_replicas`` replicas of ``num_chains`` chains on
    the geometric ladder from β = 0.1, advanced as one batch, one exchange round per PT step."""
    objective = PT(k=k, num_chains=num_chains, num_replicas=num_replicas)
    seconds = training_steps(objective, device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_pt", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                     "num_batches": num_batches, "k": k, "num_chains": num_chains, "num_replicas": num_replicas}, seconds)


def benchmark_rbm_fpcd(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500, k=1, num_chains=100,
                       repeats=2) -> dict:
    """``num_batches`` FPCD-k optimizer steps (:func:`training_steps`), fast weights at the regular rate decaying by 19/20."""
    objective = FPCD(k=k, num_chains=num_chains, fast_learning_rate=0.05)
    seconds = training_steps(objective, device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_fpcd", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                       "num_batches": num_batches, "k": k, "num_chains": num_chains}, seconds)


def benchmark_rbm_naive_mcmc(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500, burn_in=100,
                             num_chains=100, repeats=2) -> dict:
    """``num_batches`` naive-MCMC optimizer steps (:func:`training_steps`): ``num_chains`` fresh uniform chains burned in
    ``burn_in`` Gibbs steps per update (``trainer=naive_mcmc``'s settings)."""
    objective = NaiveMCMC(burn_in=burn_in, num_chains=num_chains)
    seconds = training_steps(objective, device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_naive_mcmc", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                             "num_batches": num_batches, "burn_in": burn_in, "num_chains": num_chains}, seconds)


def benchmark_rbm_nce(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500, noise_ratio=10,
                      repeats=2) -> dict:
    """``num_batches`` NCE steps (:func:`training_steps`) with ``noise_ratio`` fresh base-rate noise draws per example."""
    seconds = training_steps(NCE(noise_ratio=noise_ratio), device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_nce", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                      "num_batches": num_batches, "noise_ratio": noise_ratio}, seconds)


def benchmark_rbm_self_contrastive(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500, k=1,
                                   num_chains=100, repeats=2) -> dict:
    """``num_batches`` self-contrastive steps (:func:`training_steps`): ``num_chains`` chains of the copy, ``k`` sweeps each."""
    seconds = training_steps(SelfContrastive(k=k, num_chains=num_chains), device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_self_contrastive", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                                   "num_batches": num_batches, "k": k, "num_chains": num_chains}, seconds)


def benchmark_rbm_ratio_matching(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=100,
                                 repeats=2) -> dict:
    """``num_batches`` ratio-matching optimizer steps (:func:`training_steps`), every single flip of every example."""
    seconds = training_steps(RatioMatching(), device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_ratio_matching", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                                 "num_batches": num_batches}, seconds)


def benchmark_rbm_stochastic_ratio_matching(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500,
                                            num_units=50, nonzero_share=0.5, repeats=2) -> dict:
    """``num_batches`` stochastic ratio-matching optimizer steps (:func:`training_steps`): ``num_units`` units drawn per
    example, ``nonzero_share`` of the draws among its ones."""
    objective = RatioMatching(num_units=num_units, nonzero_share=nonzero_share)
    seconds = training_steps(objective, device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_stochastic_ratio_matching", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                                            "num_batches": num_batches, "num_units": num_units,
                                                            "nonzero_share": nonzero_share}, seconds)


def benchmark_rbm_generalized_score_matching(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=100,
                                             repeats=2) -> dict:
    """``num_batches`` generalized score matching optimizer steps (:func:`training_steps`), every single flip of every example."""
    seconds = training_steps(GeneralizedScoreMatching(), device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_generalized_score_matching", {"num_visible": num_visible, "num_hidden": num_hidden,
                                                             "batch_size": batch_size, "num_batches": num_batches}, seconds)


def benchmark_rbm_generalized_pseudolikelihood(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=100,
                                               size=4, repeats=2) -> dict:
    """``num_batches`` generalized pseudo-likelihood optimizer steps (:func:`training_steps`) over blocks of ``size`` pixels
    (``trainer=generalized_pseudolikelihood``'s sets), every configuration of every block."""
    objective = GeneralizedPseudoLikelihood("blocks", size)
    seconds = training_steps(objective, device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_generalized_pseudolikelihood", {"num_visible": num_visible, "num_hidden": num_hidden,
                                                               "batch_size": batch_size, "num_batches": num_batches, "size": size}, seconds)


def poe_training_steps(objective, device: torch.device, dim: int, batch_size: int, num_batches: int, repeats: int) -> float:
    """Best seconds of ``num_batches`` optimizer steps (loss, backward, Adam step with the score-matching configs' lr
    0.003) of ``objective`` on the complete ``dim``-d Student-t product of experts of ``poe_hais``, cycling through 10
    minibatches of its own exact samples, value checks skipped as in the Trainer's steps."""
    g = torch.Generator(device).manual_seed(0)
    model = student_t_poe(g, device, dim)
    batches = model.sample(10 * batch_size, generator=g).reshape(10, batch_size, dim)
    objective = objective.to(device)
    objective.prepare(model, batches.reshape(-1, dim), generator=g)  # e.g. NCE fits its noise, as the Trainer does
    optimizer = torch.optim.Adam([*model.parameters(), *objective.parameters()], lr=0.003)
    return best_seconds(lambda: optimizer_steps(model, objective, optimizer, batches, num_batches, g), device, repeats)


def benchmark_poe_score_matching(device: torch.device, dim=36, batch_size=500, num_batches=100, analytic=True, repeats=2) -> dict:
    """``num_batches`` score-matching steps (:func:`poe_training_steps`): the model's analytic score and Laplacian, or
    (``analytic=False``) autograd's exact Hessian diagonal, ``dim`` backward passes per step."""
    seconds = poe_training_steps(ScoreMatching(analytic=analytic), device, dim, batch_size, num_batches, repeats)
    return training_rates("poe_score_matching", {"dim": dim, "batch_size": batch_size, "num_batches": num_batches,
                                                 "analytic": analytic}, seconds)


def benchmark_poe_denoising_score_matching(device: torch.device, dim=36, batch_size=500, num_batches=100, repeats=2) -> dict:
    """``num_batches`` denoising-score-matching steps (:func:`poe_training_steps`), σ = 0.1 (conf/trainer)."""
    seconds = poe_training_steps(DenoisingScoreMatching(0.1), device, dim, batch_size, num_batches, repeats)
    return training_rates("poe_denoising_score_matching", {"dim": dim, "batch_size": batch_size, "num_batches": num_batches}, seconds)


def benchmark_poe_sliced_score_matching(device: torch.device, dim=36, batch_size=500, num_batches=100, num_projections=1,
                                        repeats=2) -> dict:
    """``num_batches`` sliced-score-matching steps (:func:`poe_training_steps`), ``num_projections`` Rademacher directions."""
    seconds = poe_training_steps(SlicedScoreMatching(num_projections), device, dim, batch_size, num_batches, repeats)
    return training_rates("poe_sliced_score_matching", {"dim": dim, "batch_size": batch_size, "num_batches": num_batches,
                                                        "num_projections": num_projections}, seconds)


def benchmark_poe_nce(device: torch.device, dim=36, batch_size=500, num_batches=100, noise_ratio=10, repeats=2) -> dict:
    """``num_batches`` NCE steps (:func:`poe_training_steps`): ν = ``noise_ratio`` fresh draws per example from the noise
    the ``trainer=nce`` settings pick for a product of experts (the family's fitted base), c learned beside the filters."""
    seconds = poe_training_steps(NCE(noise_ratio=noise_ratio), device, dim, batch_size, num_batches, repeats)
    return training_rates("poe_nce", {"dim": dim, "batch_size": batch_size, "num_batches": num_batches,
                                      "noise_ratio": noise_ratio}, seconds)
