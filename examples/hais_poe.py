"""HAIS on a product of experts (Sohl-Dickstein & Culpepper 2011): log Z and the test log-likelihood of the zoo's
products of Laplace experts on whitened 6×6 image patches — the complete one (ICA, 36 experts, exact log Z to check
against) and the twice overcomplete one (72 experts, no exact value: its card's number beside it).

    python examples/hais_poe.py          # 200 chains × 5,000 steps: seconds
    python examples/hais_poe.py --toy    # 50 chains × 200 steps
"""

import argparse

import torch
from hydra.utils import instantiate

from pfzoo import zoo
from pfzoo.estimators import HAIS
from pfzoo.models import EnergyModel


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy", action="store_true", help="a seconds-long run (fewer chains and steps)")
    args = parser.parse_args(argv)
    hais = HAIS(num_chains=50, num_steps=200) if args.toy else HAIS(num_chains=200, num_steps=5000)
    data = instantiate(zoo.pretrained_card("ica-patches")["dataset_config"])  # the patches both models were trained on
    for name in ("ica-patches", "poe_laplace-patches"):
        model = EnergyModel.from_pretrained(name)
        estimate = hais.log_likelihood(model, data.test, base_data=data.train, generator=torch.Generator().manual_seed(0))
        if model.log_partition_cost is not None:
            reference = f"exact log Z {model.log_partition():.3f}, log-likelihood {model.log_prob(data.test).mean():.3f}"
        else:
            card = zoo.pretrained_card(name)["log_likelihood"]
            reference = f"its card ({card['estimator']}, {card['settings']['num_steps']:,} steps): log Z {card['log_z']:.3f}, log-likelihood {card['value']:.3f}"
        print(f"{name} ({type(model).__name__}, {model.num_experts} experts): HAIS log Z {estimate.partition.log_z:.3f} ± "
              f"{estimate.partition.stderr:.3f}, mean test log-likelihood {estimate.mean:.3f}; {reference}")
        for warning in estimate.warnings:
            print("warning:", warning)


if __name__ == "__main__":
    main()
