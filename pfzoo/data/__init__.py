"""Datasets as :class:`DataSplits` of float32 ``[N, D]`` tensors.

``digits`` is embedded (scikit-learn) and always available; ``mnist`` and ``binarized_mnist``
read files under the data root (argument, ``$PFZOO_DATA`` or ``~/.cache/pfzoo/data``).
"""

from pfzoo.data.binarized_mnist import binarized_mnist
from pfzoo.data.digits import digits
from pfzoo.data.mnist import mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.data.splits import DataSplits

__all__ = ["DataSplits", "resolve_data_root", "digits", "mnist", "binarized_mnist"]
