"""No value is read back to the host inside an annealing step: every path's ``log_weight_increment`` and ``transition``,
as the annealing engine calls them for AIS, HAIS, RAISE and annealing over latents, on every family of the oracle table
(guard: tests/host_reads.py; on CUDA ``torch.cuda.set_sync_debug_mode("error")``)."""

import pytest
import torch
from host_reads import DEVICES, GuardedPath
from test_oracle_table import FAMILIES

from pfzoo.estimators import AIS, HAIS, RAISE, annealing, path_ais, posterior_annealing, raise_, sharding


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


