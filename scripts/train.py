"""Train a model: ``python scripts/train.py [model=rbm] [dataset=digits] [trainer=pcd] [key=value ...]`` (= ``pfzoo-train``)."""

from pfzoo.cli import train_main

if __name__ == "__main__":
    train_main()
