"""Evaluate a checkpoint: ``python scripts/evaluate.py [model=rbm] [estimator=ais] [checkpoint=PATH] [key=value ...]`` (= ``pfzoo-evaluate``)."""

from pfzoo.cli import evaluate_main

if __name__ == "__main__":
    evaluate_main()
