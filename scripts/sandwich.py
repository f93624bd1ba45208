"""Bidirectional Monte Carlo sandwich bounds (Grosse, Ghahramani & Adams 2015) on data simulated from a latent model.

    python scripts/sandwich.py                                    # small linear-Gaussian model, K = 10, 100, 1000, with exact log p(x)
    python scripts/sandwich.py --model bilinear                   # small bilinear model (no exact value)
    python scripts/sandwich.py --model linear --pretrained        # the zoo's linear_generative-patches with its card's HAIS kernel
    python scripts/sandwich.py --steps 100,1000,10000 --device cuda

For each K it simulates the same examples (x_n, z_n) from the model, anneals C chains per example forward (prior →
posterior: a stochastic lower bound on log p(x_n)) and C chains backwards from the z_n that generated x_n (a stochastic
upper bound), and prints the mean bounds, their gap and the seconds taken. The small models are drawn from --seed; with
--pretrained the zoo model's HAIS settings (step size, schedule, stiffness) from its card set the kernel and schedule.
"""

from __future__ import annotations

import argparse
import time

import torch

from pfzoo.estimators import Sandwich
from pfzoo.kernels import HMCKernel
from pfzoo.models import BilinearGenerative, Capability, LinearGenerative
from pfzoo.zoo import pretrained, pretrained_card

ZOO_NAMES = {"linear": "linear_generative-patches", "bilinear": "bilinear-patches"}


def small_model(family: str, seed: int):
    """Linear: Φ [6, 4] ~ N(0, 0.5²), Gaussian prior, σ_n = 0.3 (exact log p(x)); bilinear: M = 4, K = 3, Lc = Ld = 2,
    weights ~ N(0, 0.7²), σ_n = 0.3. float64."""
    generator = torch.Generator().manual_seed(seed)
    if family == "linear":
        return LinearGenerative(6, 4, prior="gaussian", noise_std=0.3, init_std=0.5, generator=generator).double()
    return BilinearGenerative(4, 3, 2, 2, noise_std=0.3, init_std=0.7, generator=generator).double()


def zoo_model(family: str, device: str):
    """The zoo's patch model of ``family`` and the kernel and schedule of the HAIS run on its card."""
    name = ZOO_NAMES[family]
    settings = pretrained_card(name)["log_likelihood"]["settings"]
    kernel = HMCKernel(settings["step_size"], num_leapfrog=settings["num_leapfrog"], momentum_refresh=settings["momentum_refresh"],
                       flip=settings["flip"], stiffness=settings["stiffness"])
    return pretrained(name, map_location=device), kernel, settings["schedule"], name


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("linear", "bilinear"), default="linear", help="model family (default linear)")
    parser.add_argument("--pretrained", action="store_true", help="the zoo's 36-D patch model of the family instead of a small random one")
    parser.add_argument("--steps", default=None, help="comma-separated K's (default 10,100,1000; 100,1000,5000 with --pretrained)")
    parser.add_argument("--examples", type=int, default=None, help="simulated examples B (default 100; 20 with --pretrained)")
    parser.add_argument("--chains", type=int, default=None, help="chains per example in each direction (default 20; 10 with --pretrained)")
    parser.add_argument("--step-size", type=float, default=0.2, help="HMC leapfrog step for the small models (default 0.2, HAIS's)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the small model's weights and of the simulation and chains")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.pretrained:
        model, kernel, schedule, title = zoo_model(args.model, args.device)
    else:
        model, kernel, schedule = small_model(args.model, args.seed).to(args.device), HMCKernel(args.step_size), "linear"
        title = f"small {args.model} model (seed {args.seed})"
    steps = [int(float(k)) for k in (args.steps or ("100,1000,5000" if args.pretrained else "10,100,1000")).split(",")]
    examples = args.examples or (20 if args.pretrained else 100)
    chains = args.chains or (10 if args.pretrained else 20)
    exact = Capability.EXACT_FREE_ENERGY in model.capabilities  # log p(x) in closed form (the linear-Gaussian model)
    print(f"{title}: {examples} simulated examples, {chains} chains per example each way, {schedule} schedule, on {args.device}")
    header = f"{'K':>7}  {'lower':>17}  {'upper':>17}  {'gap':>15}" + (f"  {'exact':>8}" if exact else "") + f"  {'seconds':>8}"
    print(header)
    print("-" * len(header))
    for num_steps in steps:
        start = time.perf_counter()
        estimate = Sandwich(num_chains=chains, num_steps=num_steps, schedule=schedule, kernel=kernel)(
            model, examples, generator=torch.Generator(args.device).manual_seed(args.seed))
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        row = (f"{num_steps:>7}  {estimate.lower_mean:>9.3f} ± {estimate.lower_stderr:<5.3f}  {estimate.upper_mean:>9.3f} ± "
               f"{estimate.upper_stderr:<5.3f}  {estimate.gap:>7.3f} ± {estimate.gap_stderr:<5.3f}")
        if exact:
            row += f"  {model.log_prob(estimate.data).mean().item():>8.3f}"
        print(row + f"  {seconds:>8.2f}")
        for line in estimate.warnings:
            print(f"{'':>9}warning: {line}")


if __name__ == "__main__":
    main()
