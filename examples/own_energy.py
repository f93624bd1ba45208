"""Evaluate your own energy function: wrap any ``nn.Module`` mapping ``[B, M]`` to ``[B]`` energies in ``EnergyFunction``
and estimate its log Z, here where the answer is known.

- over ℝ⁴, ``E(x) = Σ_i x_i⁴``: HAIS against the closed form ``log Z = 4 log(2 Γ(5/4))``;
- over {0, 1}¹², a small network's energy: AIS with bit-flip Metropolis against the sum over all 4,096 states.

    python examples/own_energy.py            # about a minute on one CPU core
    python examples/own_energy.py --toy      # seconds: fewer chains and steps, wider error bars
"""

import argparse
import itertools
import math

import torch
from torch import nn

from pfzoo.estimators import AIS, HAIS
from pfzoo.models import EnergyFunction


class Quartic(nn.Module):
    """``E(x) = Σ_i x_i⁴`` for ``x [B, M]`` → ``[B]``."""

    def forward(self, x):
        return x.pow(4).sum(-1)


class TinyNet(nn.Module):
    """A two-layer network's output as the energy of binary vectors ``[B, 12]`` → ``[B]`` (fixed random weights)."""

    def __init__(self, generator):
        super().__init__()
        self.hidden = nn.Linear(12, 8)
        self.out = nn.Linear(8, 1)
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.7)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x))).squeeze(-1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy", action="store_true", help="a seconds-long run (fewer chains and steps)")
    args = parser.parse_args(argv)
    chains, steps = (50, 200) if args.toy else (200, 2000)
    g = torch.Generator().manual_seed(0)

    exact = 4 * math.log(2 * math.gamma(1.25))
    estimate = HAIS(num_chains=chains, num_steps=steps)(EnergyFunction(Quartic(), num_visible=4), generator=g)
    print(f"quartic over R^4:  HAIS log Z = {estimate.log_z:.3f} ± {estimate.stderr:.3f}, exact {exact:.3f}")

    net = TinyNet(torch.Generator().manual_seed(1))
    states = torch.tensor(list(itertools.product([0.0, 1.0], repeat=12)))
    with torch.no_grad():
        exact = torch.logsumexp(-net(states).double(), 0).item()
    model = EnergyFunction(net, num_visible=12, binary=True)
    estimate = AIS(num_chains=chains, num_steps=steps)(model, generator=g)
    print(f"network over {{0,1}}^12: AIS log Z = {estimate.log_z:.3f} ± {estimate.stderr:.3f}, exact {exact:.3f}")
    for warning in estimate.warnings:
        print("warning:", warning)


if __name__ == "__main__":
    main()
