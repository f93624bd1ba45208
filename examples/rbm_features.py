"""RBM features for a classifier: train an RBM on the embedded digits (CD-1, minibatches of 20), then fit a logistic regression on its
hidden probabilities ``p(h = 1 | v)`` and compare its test accuracy with one fitted on the raw binary pixels (the classic
evaluation of learned features; the digits come with their class labels).

    python examples/rbm_features.py            # 200 hidden units, 30 epochs: seconds (0.933 against 0.928 from the
                                               # pixels; 360 test digits: ± 0.013)
    python examples/rbm_features.py --toy      # 2 epochs
"""

import argparse
import tempfile

import torch
from pfzoo.data import digits
from pfzoo.models import RBM
from pfzoo.studies.features import feature_accuracy
from pfzoo.training import CD, Trainer


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy", action="store_true", help="a seconds-long run (2 epochs)")
    parser.add_argument("--hidden", type=int, default=200, help="hidden units")
    args = parser.parse_args(argv)
    data = digits()
    rbm = RBM(data.train.shape[1], args.hidden, generator=torch.Generator().manual_seed(0))
    rbm.init_from_data(data.train)
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = Trainer(CD(k=1), lambda parameters: torch.optim.SGD(parameters, lr=0.1, momentum=0.5), run_dir=run_dir,
                          epochs=2 if args.toy else 30, batch_size=20, progress=False)
        trainer.fit(rbm, data)
    result = feature_accuracy(rbm, data, max_iter=2000)
    print(f"logistic regression on raw pixels:             test accuracy {result.pixels:.3f}")
    print(f"... on the RBM's {args.hidden} hidden probabilities: test accuracy {result.features:.3f}")


if __name__ == "__main__":
    main()
