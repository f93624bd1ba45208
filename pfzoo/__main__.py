"""``python -m pfzoo {train,evaluate} [key=value ...]``: the same command lines as ``pfzoo-train`` / ``pfzoo-evaluate``;
``python -m pfzoo torchrun [torchrun options] scripts/train.py [key=value ...]`` is ``pfzoo-torchrun``;
``python -m pfzoo --help`` lists the commands, ``--version`` prints the version."""

import sys

from pfzoo.cli import main

if __name__ == "__main__":
    main(sys.argv[1:])
