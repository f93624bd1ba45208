"""The path pictures' sampler and equilibrium check (pfzoo.studies.path_samples) on a tiny RBM, against enumeration."""

import torch
from factories import random_rbm

from pfzoo.models import RBM
from pfzoo.paths import exact_rbm_moments
from pfzoo.studies.path_samples import path_samples, start_agreement

V, H, CHAINS = 6, 3, 2000


def test_start_agreement_is_one_for_independent_draws_and_large_for_different_groups():
    generator = torch.Generator().manual_seed(0)
    same = [torch.bernoulli(torch.full((2000, 300), 0.3), generator=generator) for _ in range(2)]
    other = torch.bernoulli(torch.full((2000, 300), 0.5), generator=generator)
    assert abs(start_agreement(*same)["rms_ratio"] - 1) < 0.2
    assert start_agreement(same[0], other)["rms_ratio"] > 5
    check = start_agreement(same[0], other)
    assert abs(check["density_difference"] + 0.2) < 5 * check["density_stderr"]


def test_chain_means_match_the_intermediate_rbms_enumerated():
    """GA at β = ½ is the RBM with W/2 and halved biases (uniform base); both paths end at the target at β = 1."""
    target = random_rbm(V, H, scale=1.0, bias_scale=1.0, seed=3)
    train = torch.bernoulli(torch.full((CHAINS, V), 0.5), generator=torch.Generator().manual_seed(1))
    out = path_samples(target, train, [0.5, 1.0], chains=CHAINS, sweeps=30, generator=torch.Generator().manual_seed(2),
                       target_moments=exact_rbm_moments(target), num_chains=500, iterations=200)
    half = RBM.from_tensors(0.5 * target.weight.detach(), 0.5 * target.visible_bias.detach(), 0.5 * target.hidden_bias.detach())
    expected = {("geometric", 0): exact_rbm_moments(half)[0], ("geometric", 1): exact_rbm_moments(target)[0],
                ("moment_averaged", 1): exact_rbm_moments(target)[0]}
    for (kind, row), mean in expected.items():
        samples = out[kind]["samples"][row].double()
        stderr = samples.std(0) / CHAINS**0.5
        assert ((samples.mean(0) - mean.double()).abs() < 5 * stderr + 1e-3).all(), (kind, row)
        assert out[kind]["checks"][row]["rms_ratio"] < 2
