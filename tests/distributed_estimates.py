"""The estimates each rank computes in tests/test_distributed.py; a module of its own so that a rank imports little."""

import json
from pathlib import Path

import torch

from pfzoo import distributed
from pfzoo.estimators import AIS, CSL, HAIS, RAISE, SMC, BridgeSampling, LinkedImportanceSampling
from pfzoo.models import RBM, Gaussian, LinearGenerative


def estimates(seed: int) -> dict:
    """AIS (float64 and float32), bridge sampling and LIS (float32: blocks batched), RAISE, CSL, HAIS, HAIS over a generative
    model's latents, SMC (three blocks of groups) and waste-free SMC over the latents on small models, floats as hex so that
    equality is to the last bit."""
    g = torch.Generator().manual_seed(3)
    model = RBM.from_tensors(torch.randn(10, 6, generator=g, dtype=torch.float64) * 1.5,
                             torch.randn(10, generator=g, dtype=torch.float64), torch.randn(6, generator=g, dtype=torch.float64))
    data = (torch.rand(96, 10, generator=g, dtype=torch.float64) < 0.4).double()
    gaussian = Gaussian.from_tensors(torch.tensor([[2.0, 0.3], [0.3, 1.0]], dtype=torch.float64), torch.tensor([0.5, -1.0], dtype=torch.float64))

    def seeded():
        return torch.Generator().manual_seed(seed)

    # 96 chains or examples: three blocks of 32, so one rank runs one block and the other two
    ais = AIS(num_chains=96, num_steps=60, diagnostics=True)(model, data=data, generator=seeded())
    # float32: a rank's blocks advance as one batch with their ChainStreams (float64 blocks run one after another)
    model32 = RBM.from_tensors(*(tensor.float() for tensor in (model.weight, model.visible_bias, model.hidden_bias)))
    ais32 = AIS(num_chains=96, num_steps=60, diagnostics=True)(model32, data=data.float(), generator=seeded())
    bridge = BridgeSampling(num_chains=96, samples_per_chain=4, burn_in=20, thin=2)(model32, data=data.float(), generator=seeded())
    linked = LinkedImportanceSampling(num_runs=96, num_levels=10, states_per_level=3)(model32, data=data.float(), generator=seeded())
    raise_ = RAISE(num_chains=3, num_steps=30, diagnostics=True).log_likelihood(model, data, generator=seeded())
    csl = CSL(num_chains=96, samples_per_chain=5, burn_in=2).log_likelihood(model, data, generator=seeded())
    hais = HAIS(num_chains=96, num_steps=40, step_size=0.3)(gaussian, generator=seeded())
    generative = LinearGenerative.from_tensors(0.5 * torch.randn(6, 4, generator=g, dtype=torch.float64), prior="laplace", noise_std=0.3)
    latents = HAIS(num_chains=4, num_steps=20, step_size=0.1).log_likelihood(generative, generative.sample(96, generator=g), generator=seeded())
    # three blocks of two groups, each block its own adaptive run: one rank runs one, the other two
    smc = SMC(num_chains=192, num_groups=6, num_blocks=3, target_cess=0.9)(model, data=data, generator=seeded())
    smc_latents = SMC(num_chains=16, num_groups=2, chain_length=4, target_cess=0.7).log_likelihood(
        generative, generative.sample(96, generator=g), generator=seeded())  # 96 examples: three blocks
    return {
        "ais": hexed(ais.log_weights) + hexed([ais.log_z, ais.stderr, ais.ess]) + [hexed(column) for column in ais.info["diagnostics"][1:]],
        "ais32": hexed(ais32.log_weights) + hexed([ais32.log_z, ais32.stderr, ais32.ess])
        + [hexed(column) for column in ais32.info["diagnostics"][1:]],
        "bridge": hexed([bridge.log_z, bridge.stderr, bridge.ess]),
        "linked": hexed(linked.log_weights),
        "raise": hexed(raise_.info["log_weights"]) + hexed([raise_.mean, raise_.stderr]) + hexed(raise_.info["diagnostics"].increment_var),
        "csl": hexed(csl.per_example) + hexed([csl.stderr]),
        "hais": hexed(hais.log_weights) + hexed(hais.info["acceptance"]),
        "posterior": hexed(latents.per_example) + hexed(latents.info["acceptance"]) + hexed([latents.stderr]),
        "smc": hexed(smc.log_weights) + hexed([smc.log_z, smc.stderr, smc.ess]) + [hexed(betas) for betas in smc.info["betas"]],
        "smc_latents": hexed(smc_latents.per_example) + hexed(smc_latents.info["acceptance"]) + hexed([smc_latents.stderr]),
        "check": {"ais": [ais.log_z, ais.stderr, model.log_partition().item()],
                  "ais32": [ais32.log_z, ais32.stderr, model.log_partition().item()],
                  "hais": [hais.log_z, hais.stderr, gaussian.log_partition().item()],
                  "smc": [smc.log_z, smc.stderr, model.log_partition().item()]},
    }


def hexed(values) -> list[str]:
    return [float(value).hex() for value in torch.as_tensor(values).flatten().tolist()]


def rank_main(out: str, seed: int) -> None:
    """One rank of a ``torchrun``-style launch (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` set): its estimates to ``out/rank{r}.json``."""
    distributed.initialize()
    try:
        Path(out, f"rank{distributed.rank()}.json").write_text(json.dumps(estimates(seed)))
    finally:
        distributed.shutdown()
