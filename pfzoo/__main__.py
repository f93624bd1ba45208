"""``python -m pfzoo {train,evaluate} [key=value ...]``: the same command lines as ``pfzoo-train`` / ``pfzoo-evaluate``;
``python -m pfzoo torchrun [torchrun options] scripts/train.py [key=value ...]`` is ``pfzoo-torchrun``."""

import sys

from pfzoo.cli import run, torchrun_main

if __name__ == "__main__":
    if sys.argv[1:2] == ["torchrun"]:
        torchrun_main(sys.argv[2:])
    run(sys.argv[1] if len(sys.argv) > 1 else "", sys.argv[2:])  # an unknown task is reported in one line like any error
