"""No value is read back to the host inside an annealing step: every path's ``log_weight_increment`` and ``transition``,
as the annealing engine calls them for AIS, HAIS, RAISE and annealing over latents and as bridge sampling and LIS call
them, on every family of the oracle table
(guard: tests/host_reads.py; on CUDA ``torch.cuda.set_sync_debug_mode("error")``)."""

import pytest
import torch
from host_reads import DEVICES, GuardedPath
from test_oracle_table import FAMILIES

from pfzoo.estimators import AIS, HAIS, RAISE, BridgeSampling, LinkedImportanceSampling, annealing, path_ais, posterior_annealing, raise_, sharding
from pfzoo.paths import registry


@pytest.fixture
def guarded_annealing(monkeypatch, request):
    """Route every estimator's annealing loop through :class:`GuardedPath`; yields the count of guarded steps."""
    device = request.getfixturevalue("device")
    counter = [0]

    def anneal(path, betas, state, **kwargs):
        return annealing.anneal(GuardedPath(path, device, counter), betas, state, **kwargs)

    for module in (raise_, sharding, posterior_annealing, path_ais):  # AIS and HAIS anneal through sharding
        monkeypatch.setattr(module, "anneal", anneal)
    return counter


SMALL_ESTIMATORS = {
    "ais": lambda: AIS(num_chains=16, num_steps=20),
    "hais": lambda: HAIS(num_chains=16, num_steps=20, step_size=0.1),
    "raise": lambda: RAISE(num_chains=2, num_steps=10),
}
ANNEALING_CASES = [pytest.param(family, name, id=f"{family.name}-{name}") for family in FAMILIES for name in SMALL_ESTIMATORS
                   if name in family.applicable]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("family, estimator_name", ANNEALING_CASES)
def test_annealing_steps_read_nothing_back(family, estimator_name, device, guarded_annealing):
    torch.manual_seed(0)
    model = family.model()
    data = family.data(model)[:8]
    model, data = model.to(device), data.to(device)
    estimator = SMALL_ESTIMATORS[estimator_name]().to(device)
    estimator.log_likelihood(model, data, base_data=data, generator=torch.Generator(device).manual_seed(0))
    assert guarded_annealing[0] >= 10  # the guard saw the steps




PATH_ESTIMATORS = {
    "bridge": lambda: BridgeSampling(num_chains=4, samples_per_chain=3, burn_in=5, thin=2),
    "linked": lambda: LinkedImportanceSampling(num_runs=4, num_levels=5, states_per_level=3),
}
PATH_CASES = [pytest.param(family, name, id=f"{family.name}-{name}") for family in FAMILIES for name in PATH_ESTIMATORS
              if name in family.applicable]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("family, estimator_name", PATH_CASES)
def test_bridge_and_linked_steps_read_nothing_back(family, estimator_name, device, monkeypatch):
    """Bridge sampling and LIS drive the path themselves (draws at β = 1, chains at every level): the same guard."""
    counter = [0]
    build = registry.build

    def guarded_build(*args, **kwargs):
        path, base = build(*args, **kwargs)
        return GuardedPath(path, device, counter), base

    monkeypatch.setattr(registry, "build", guarded_build)
    torch.manual_seed(0)
    model = family.model()
    data = family.data(model)[:8]
    model, data = model.to(device), data.to(device)
    PATH_ESTIMATORS[estimator_name]().to(device)(model, data=data, generator=torch.Generator(device).manual_seed(0))
    assert counter[0] >= 10  # the guard saw the steps
