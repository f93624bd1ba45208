"""Datasets as :class:`DataSplits` of float32 ``[N, D]`` tensors.

``digits`` is embedded (scikit-learn) and always available; ``mnist`` and ``binarized_mnist``
read files under the data root (argument, ``$PFZOO_DATA`` or ``~/.cache/pfzoo/data``);
``patches`` takes natural image patches from embedded photos or from images under the data root.
``array`` loads any ``.npy`` / ``.npz`` file. Synthetic sets: ``spin_glass`` draws Gibbs samples of a
random Ising spin glass (lattice or fully connected) whose truth ``spin_glass_model`` rebuilds from the
same arguments; ``hopfield_patterns`` gives random bit patterns to store, with ``random_patterns`` and
``corrupt`` for recall cues.
"""

from pfzoo.data.arrays import array
from pfzoo.data.binarized_mnist import binarized_mnist
from pfzoo.data.digits import digits
from pfzoo.data.hopfield_patterns import corrupt, hopfield_patterns, noisy_copies, random_patterns
from pfzoo.data.images import embedded_images, read_image
from pfzoo.data.mnist import mnist
from pfzoo.data.patches import PatchTransform, fit_patch_transform, patches, sample_patches, split_patches
from pfzoo.data.root import resolve_data_root
from pfzoo.data.spin_glass import fully_connected_couplings, lattice_couplings, sample_spin_glass, spin_glass, spin_glass_model
from pfzoo.data.splits import DataSplits
from pfzoo.data.subsets import SUBSET_ORDERS, describe_subset, subset_rows

__all__ = [
    "DataSplits",
    "SUBSET_ORDERS",
    "describe_subset",
    "subset_rows",
    "resolve_data_root",
    "digits",
    "mnist",
    "binarized_mnist",
    "patches",
    "PatchTransform",
    "fit_patch_transform",
    "sample_patches",
    "split_patches",
    "read_image",
    "embedded_images",
    "array",
    "spin_glass",
    "spin_glass_model",
    "sample_spin_glass",
    "lattice_couplings",
    "fully_connected_couplings",
    "hopfield_patterns",
    "noisy_copies",
    "random_patterns",
    "corrupt",
]
