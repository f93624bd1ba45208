"""The Ising cases: fitting the MPF paper's spin glass and Gibbs-sampling Ising models.

MPF on an Ising model (``ising_mpf``): 20,000 samples of the 10×10 periodic spin glass
(:func:`pfzoo.data.spin_glass`), a fully connected 100-unit model in float64: full-batch
``BitFlipMPF`` loss + gradient evaluations per second, and L-BFGS (strong Wolfe) iterations per second
from the independent-units start, with the coupling error ε_J reached (the thesis: ε_J 0.0172 in ~60 s).

Gibbs sampling of Ising models (``ising_gibbs``): chain-sweeps per second (sweeps/s × chains) with 1000
chains, for the 10×10 lattice (checkerboard: two blocks) and a dense 100-unit model (100 single-unit blocks).
"""

from __future__ import annotations

import time

import torch

from pfzoo.data import spin_glass, spin_glass_model
from pfzoo.models import Ising
from pfzoo.studies.benchmark.timing import best_seconds, timed
from pfzoo.studies.ising_recovery import coupling_error
from pfzoo.training import BitFlipMPF


def benchmark_ising_mpf(device: torch.device, side=10, num_samples=20_000, lbfgs_iterations=20, evaluations=10, repeats=3) -> dict:
    """BitFlipMPF on ``num_samples`` spin-glass samples ``[S, side²]``: the best seconds of one full-batch loss + gradient,
    then ``lbfgs_iterations`` L-BFGS iterations from the independent-units start and the coupling error they reach."""
    started = time.perf_counter()
    data = spin_glass(side=side, num_train=num_samples, num_test=1, seed=0)
    data_seconds = time.perf_counter() - started
    truth = spin_glass_model(side=side, seed=0)
    train = data.train.to(device=device, dtype=torch.float64)
    num_units = train.shape[1]
    objective = BitFlipMPF()

    def start_model() -> Ising:  # J = 0 and the independent-units biases, as in conf/experiment/ising_mpf.yaml
        model = Ising(num_units, init_std=0.0).to(device=device, dtype=torch.float64)
        model.init_from_data(train)
        return model

    model = start_model()

    def loss_and_gradient():
        for _ in range(evaluations):
            model.zero_grad(set_to_none=True)
            objective.loss(model, train).backward()

    evaluation_seconds = best_seconds(loss_and_gradient, device, repeats) / evaluations

    model = start_model()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=lbfgs_iterations, history_size=20,
                                  line_search_fn="strong_wolfe", tolerance_grad=0.0, tolerance_change=0.0)

    def closure():
        optimizer.zero_grad(set_to_none=True)
        loss = objective.loss(model, train)
        loss.backward()
        return loss

    _, lbfgs_seconds = timed(lambda: optimizer.step(closure), device)
    state = optimizer.state[optimizer._params[0]]
    return {
        "name": "ising_mpf",
        "shape": {"side": side, "num_units": num_units, "num_samples": num_samples, "dtype": "float64",
                  "lbfgs_iterations": lbfgs_iterations},
        "data_seconds": data_seconds,
        "evaluation_seconds": evaluation_seconds,
        "evaluations_per_second": 1.0 / evaluation_seconds,
        "lbfgs_seconds": lbfgs_seconds,
        "lbfgs_iterations_per_second": state["n_iter"] / lbfgs_seconds,
        "lbfgs_evaluations_per_iteration": state["func_evals"] / state["n_iter"],
        "coupling_error": coupling_error(model.cpu(), truth),
        "coupling_error_at_start": coupling_error(Ising(num_units, init_std=0.0).double(), truth),
        "thesis_coupling_error": 0.0172,
        "thesis_seconds": 60.0,
    }


def benchmark_ising_gibbs(device: torch.device, side=10, num_units=100, num_chains=1000, num_sweeps=100, repeats=3) -> dict:
    """``num_sweeps`` block-Gibbs sweeps of ``num_chains`` uniform chains ``[C, D]``, on the ``side``×``side`` lattice and on
    a dense ``num_units``-unit model."""
    g = torch.Generator(device).manual_seed(0)
    results = {}
    for kind, model in (("lattice", spin_glass_model("lattice", side=side)),
                        ("fully_connected", spin_glass_model("fully_connected", num_units=num_units))):
        model = model.to(device)
        blocks = model.gibbs_blocks()
        x = (torch.rand(num_chains, model.num_units, generator=g, device=device) < 0.5).float()

        def sweeps():
            state = x
            for _ in range(num_sweeps):
                state = model.gibbs_sweep(state, generator=g, blocks=blocks)

        seconds = best_seconds(sweeps, device, repeats)
        results[kind] = {
            "num_units": model.num_units,
            "num_blocks": len(blocks),
            "seconds": seconds,
            "sweeps_per_second": num_sweeps / seconds,
            "chain_sweeps_per_second": num_chains * num_sweeps / seconds,
            "unit_updates_per_second": num_chains * num_sweeps * model.num_units / seconds,
        }
    return {"name": "ising_gibbs", "shape": {"num_chains": num_chains, "num_sweeps": num_sweeps}, **results}
