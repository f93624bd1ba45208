"""Compare two models: which of the zoo's RBM and DBM on the embedded digits fits the test digits better, and by how
much, without estimating either partition function (bridge sampling between the two models' own samples), checked
against the exact values (both models are small enough to enumerate).

    python examples/compare_models.py          # seconds to a minute
    python examples/compare_models.py --toy    # fewer draws
"""

import argparse

import torch

from pfzoo.data import digits
from pfzoo.estimators.comparison import compare
from pfzoo.models import DBM, RBM


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy", action="store_true", help="a seconds-long run (fewer draws)")
    args = parser.parse_args(argv)
    data = digits()
    rbm, dbm = RBM.from_pretrained("rbm-digits"), DBM.from_pretrained("dbm-digits")
    result = compare(dbm, rbm, data.test, num_samples=200 if args.toy else 2000, generator=torch.Generator().manual_seed(0))
    exact = (dbm.log_prob(data.test).mean() - rbm.log_prob(data.test).mean()).item()
    print(f"mean log p_DBM - log p_RBM on {result.num_test} test digits: {result.difference:+.3f} ± {result.stderr:.3f} "
          f"(test-set sampling: ± {result.data_stderr:.3f}); exact {exact:+.3f}")
    print(f"better: {'DBM' if result.better == 'A' else 'RBM'}, {'significant' if result.significant else 'not significant'} at 3 stderr")
    for warning in result.warnings:
        print("warning:", warning)


if __name__ == "__main__":
    main()
