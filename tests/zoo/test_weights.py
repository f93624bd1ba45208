"""The torchvision-style metadata of the zoo's weights (issue 50, item 8): a DEFAULT entry per family, the parameter
count and file size, and the preprocessing bound to the weights (``weights.transforms()``)."""

import pytest
import torch

from pfzoo import zoo
from pfzoo.data import digits, embedded_images, patches, split_patches
from pfzoo.models import RBM, Ising, ProductOfExperts
from pfzoo.models.registry import registered_models
from pfzoo.zoo.hub import entrypoint


def test_every_family_with_weights_has_a_default_on_data_that_ships_with_the_package():
    families = sorted({entry.family for entry in zoo.list_pretrained_weights()})
    assert families == sorted(registered_models())  # every family has weights, so every family has a DEFAULT
    for family in families:
        default = zoo.default_weights(family)
        assert default.family == family and zoo.registry.ships_with_package(default.dataset_config), family
    assert zoo.default_weights("rbm").name == "rbm-digits" and zoo.default_weights(Ising).name == "ising-spin_glass"
    assert zoo.default_weights(ProductOfExperts).name == "poe_student-patches"  # the better of the two on the same patches
    model = RBM.from_pretrained(zoo.DEFAULT)
    assert torch.equal(model.weight, zoo.pretrained("rbm-digits").weight)
    assert torch.equal(entrypoint("rbm")(pretrained="DEFAULT").weight, model.weight)  # torch.hub's entry point too
    with pytest.raises(ValueError, match="unknown model 'nosuch'; registered models"):
        zoo.default_weights("nosuch")


def test_parameter_count_and_file_size_are_those_of_the_checkpoint():
    for entry in zoo.list_pretrained_weights():
        model = entry.load()
        assert entry.num_parameters == sum(value.numel() for value in model.state_dict().values()), entry.name
        assert entry.file_size == entry.checkpoint.stat().st_size == zoo.pretrained_card(entry.name)["checkpoint"]["bytes"], entry.name


def test_digit_weights_binarize_raw_images_as_their_data_set_did():
    from sklearn.datasets import load_digits

    transform = zoo.pretrained_weights("rbm-digits").transforms()
    raw = torch.from_numpy(load_digits().images)  # [1797, 8, 8], intensities 0-16
    rows = transform(raw)
    assert rows.shape == (1797, 64) and rows.dtype == torch.float32 and "pixels > 8 on a 0–16 scale" in str(transform)
    seen = {tuple(row.tolist()) for row in rows}
    assert all(tuple(row.tolist()) in seen for row in digits().test)  # every test row is a raw digit put through it
    with pytest.raises(ValueError, match=r"images must have 64 values per row, got shape \(3, 9\)"):
        transform(torch.zeros(3, 9))
    states = zoo.pretrained_weights("ising-spin_glass").transforms()
    assert torch.equal(states(torch.ones(2, 100)), torch.ones(2, 100)) and str(states).startswith("none")
    mnist = zoo.pretrained_weights("rbm-binarized_mnist-pcd-20").transforms()
    assert torch.equal(mnist(torch.tensor([[0, 127, 128, 255] * 196], dtype=torch.uint8)), torch.tensor([[0.0, 0, 1, 1] * 196]))


@pytest.mark.slow
def test_patch_weights_whiten_raw_patches_as_their_data_set_did():
    entry = zoo.pretrained_weights("poe_student-patches")
    config = {key: value for key, value in entry.dataset_config.items() if key != "_target_"}
    _, raw_test = split_patches(embedded_images(), config["num_train"], config["num_test"], config["patch_size"],
                                generator=torch.Generator().manual_seed(config["seed"]))
    whitened = entry.transforms()(raw_test)
    assert torch.allclose(whitened, patches(**config).test, atol=1e-6)
