"""The shared factories of tests/factories.py: one for every registered model family, each seeded by its own generator.

A new family registered with ``@register_model`` fails :func:`test_every_registered_family_has_a_factory` until it adds
a factory to tests/factories.py and a row to ``CASES``.
"""

import inspect

import pytest
import torch
from factories import (
    all_binary_states,
    random_bilinear_generative,
    random_dbm,
    random_dbn,
    random_energy_function,
    random_gaussian,
    random_gbrbm,
    random_hopfield,
    random_ica,
    random_ising,
    random_linear_generative,
    random_mcrbm,
    random_poe,
    random_rbm,
)

from pfzoo.models import Capability, EnergyFunction, model_class, registered_models

# (registered name, case id, build(seed, dtype), whether log Z is exact at this size). The sizes are the small ones the
# oracle tests use: binary families enumerable, continuous ones complete or Gaussian (closed form).
CASES = [
    ("rbm", "rbm", lambda seed, dtype: random_rbm(4, 3, seed=seed, dtype=dtype), True),
    ("gaussian_rbm", "gaussian_rbm", lambda seed, dtype: random_gbrbm(3, 4, seed=seed, dtype=dtype), True),
    ("dbm", "dbm", lambda seed, dtype: random_dbm([4, 3, 2], seed=seed, dtype=dtype), True),
    ("dbn", "dbn", lambda seed, dtype: random_dbn([4, 3, 2], seed=seed, dtype=dtype), True),
    ("ising", "ising", lambda seed, dtype: random_ising(5, seed=seed, dtype=dtype), True),
    ("hopfield", "hopfield", lambda seed, dtype: random_hopfield(5, seed=seed, dtype=dtype), True),
    ("gaussian", "gaussian", lambda seed, dtype: random_gaussian(3, seed=seed, dtype=dtype), True),
    ("poe", "poe_laplace", lambda seed, dtype: random_poe(3, seed=seed, dtype=dtype), True),
    ("poe", "poe_student_t", lambda seed, dtype: random_poe(3, expert="student_t", seed=seed, dtype=dtype), True),
    ("poe", "poe_student_t_overcomplete", lambda seed, dtype: random_poe(2, 3, "student_t", seed=seed, dtype=dtype), False),
    ("ica", "ica", lambda seed, dtype: random_ica(3, seed=seed, dtype=dtype), True),
    ("mcrbm", "mcrbm", lambda seed, dtype: random_mcrbm(seed=seed, dtype=dtype), False),
    ("linear_generative", "linear_gaussian", lambda seed, dtype: random_linear_generative(prior="gaussian", seed=seed, dtype=dtype), True),
    ("linear_generative", "linear_laplace", lambda seed, dtype: random_linear_generative(seed=seed, dtype=dtype), True),
    ("bilinear", "bilinear", lambda seed, dtype: random_bilinear_generative(seed=seed, dtype=dtype), True),
]
IDS = [case_id for _, case_id, _, _ in CASES]


def parameters(model) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def test_every_registered_family_has_a_factory():
    covered = sorted({name for name, _, _, _ in CASES})
    assert covered == registered_models(), "every registered model family needs a factory in tests/factories.py and a row in CASES"


@pytest.mark.parametrize("name, build, exact", [(name, build, exact) for name, _, build, exact in CASES], ids=IDS)
def test_factory_builds_its_family_in_the_requested_dtype(name, build, exact):
    for dtype in (torch.float64, torch.float32):
        model = build(0, dtype)
        assert type(model) is model_class(name)
        assert {tensor.dtype for tensor in model.state_dict().values() if tensor.is_floating_point()} == {dtype}


@pytest.mark.parametrize("build", [build for _, _, build, _ in CASES], ids=IDS)
def test_factory_draws_from_its_own_generator_only(build):
    """Same seed, same model whatever the global RNG holds (some constructors draw throw-away initial weights from it)."""
    torch.manual_seed(123)
    first = parameters(build(0, torch.float64))
    torch.manual_seed(456)
    again, other = parameters(build(0, torch.float64)), parameters(build(1, torch.float64))
    assert first.keys() == again.keys() == other.keys()
    assert all(torch.equal(first[key], again[key]) for key in first)
    assert any(not torch.equal(first[key], other[key]) for key in first)


@pytest.mark.parametrize("build, exact", [(build, exact) for _, _, build, exact in CASES], ids=IDS)
def test_factory_sizes_give_an_exact_log_partition_where_the_family_has_one(build, exact):
    model = build(0, torch.float64)
    assert (Capability.EXACT_LOG_Z in model.capabilities) == exact
    if exact:
        assert torch.isfinite(model.log_partition()).all()


def test_energy_function_factory_wraps_the_gaussian_of_the_same_seed():
    wrapped, gaussian = random_energy_function(3, seed=2), random_gaussian(3, seed=2, normalize_factor=True)
    assert type(wrapped) is EnergyFunction and not wrapped.binary_visible
    x = torch.randn(11, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    torch.testing.assert_close(wrapped.energy(x), gaussian.energy(x), rtol=1e-12, atol=1e-12)


def test_binary_energy_function_factory_is_enumerable():
    model = random_energy_function(4, seed=3, binary=True)
    assert model.binary_visible and Capability.BINARY_STATES in model.capabilities
    energies = model.energy(all_binary_states(4))
    assert energies.shape == (16,) and torch.isfinite(energies).all() and energies.unique().numel() > 1


@pytest.mark.parametrize("build", [build for _, _, build, _ in CASES], ids=IDS)
def test_every_sampler_names_its_chain_length_num_steps(build):
    """Generic code calls ``model.sample(n, num_steps=k)`` on any family: a sampler that runs a chain takes its length
    under that one name (not ``num_sweeps`` or another), and one that samples exactly takes no step count at all."""
    model = build(0, torch.float64)
    parameters = inspect.signature(model.sample).parameters
    counts = {name for name in parameters if name.startswith("num_") and name != "num_samples"}
    assert counts <= {"num_steps", "num_leapfrog"}, counts  # HMC samplers also take the leapfrog steps per move
    takes_options = any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values())
    if "num_steps" in parameters or takes_options and not getattr(model, "samples_exactly", False):
        samples = model.sample(3, num_steps=2, generator=torch.Generator().manual_seed(0))
        assert samples.shape == (3, model.num_visible)
