"""Loading the zoo the ways other libraries' users expect: ``Family.from_pretrained(name)`` (refusing another family's
name in one line), the typed weights listing by family (as torchvision's ``get_model_weights``), and ``torch.hub.load``
from the checkout, which gives the model ``zoo.pretrained`` gives."""

from pathlib import Path

import pytest
import torch
from script_modules import load_script

from pfzoo import zoo
from pfzoo.models import DBM, RBM, EnergyModel, Ising, model_class, registered_models

REPO = Path(__file__).resolve().parents[2]
ZOO = REPO / "models"


def same_model(a, b):
    return type(a) is type(b) and a.config() == b.config() and a.state_dict().keys() == b.state_dict().keys() and all(
        torch.equal(a.state_dict()[key], b.state_dict()[key]) for key in a.state_dict())


def test_from_pretrained_loads_the_zoo_model_of_its_family():
    model = RBM.from_pretrained("rbm-digits")
    assert same_model(model, zoo.pretrained("rbm-digits")) and not model.training
    assert type(DBM.from_pretrained("dbm-digits", zoo_dir=ZOO)) is DBM
    assert type(EnergyModel.from_pretrained("ising-spin_glass")) is Ising
    assert type(Ising.from_pretrained("hopfield-hopfield_patterns")).__name__ == "Hopfield"  # a Hopfield network is an Ising model


def test_from_pretrained_refuses_another_familys_name_in_one_line_listing_the_names_that_fit():
    names = [entry.name for entry in zoo.list_pretrained_weights("rbm")]
    with pytest.raises(ValueError) as caught:
        RBM.from_pretrained("dbm-digits")
    message = str(caught.value)
    assert "\n" not in message and "'dbm-digits' is of class DBM, not RBM" in message
    assert message.endswith("RBM names: " + ", ".join(names)) and "rbm-digits" in names and "dbm-digits" not in names
    dbm_names = "dbm-binarized_mnist, dbm-binarized_mnist-500-500-1000, dbm-digits"
    with pytest.raises(ValueError, match=rf"^DBM\.from_pretrained: no pretrained model 'dbm-nope' in .*; DBM names: {dbm_names}$"):
        DBM.from_pretrained("dbm-nope")


def test_weights_listing_by_family_name_or_class():
    everything = zoo.list_pretrained_weights()
    for family in registered_models():
        entries = zoo.list_pretrained_weights(family, zoo_dir=ZOO)
        assert entries == [entry for entry in everything if issubclass(model_class(entry.family), model_class(family))]
    rbms = zoo.list_pretrained_weights(RBM)
    assert rbms == zoo.list_pretrained_weights("rbm") and {entry.family for entry in rbms} == {"rbm"} and len(rbms) >= 6
    entry = zoo.pretrained_weights("rbm-digits")
    assert entry.model_class is RBM and entry.checkpoint == ZOO / "rbm-digits" / zoo.CHECKPOINT_FILE and entry.checkpoint.is_file()
    with pytest.raises(ValueError, match="unknown model 'nope'"):
        zoo.list_pretrained_weights("nope")


def test_torch_hub_load_from_the_checkout_gives_the_zoo_model():
    model = torch.hub.load(str(REPO), "rbm", pretrained="rbm-digits", source="local", verbose=False)
    assert same_model(model, zoo.pretrained("rbm-digits"))
    fresh = torch.hub.load(str(REPO), "rbm", num_visible=6, num_hidden=3, source="local", verbose=False)
    assert type(fresh) is RBM and fresh.config()["num_hidden"] == 3
    with pytest.raises(ValueError, match="RBM names: .*rbm-digits"):
        torch.hub.load(str(REPO), "rbm", pretrained="dbm-digits", source="local", verbose=False)
    with pytest.raises(ValueError, match="not both"):
        torch.hub.load(str(REPO), "rbm", pretrained="rbm-digits", num_hidden=3, source="local", verbose=False)


def test_hubconf_offers_one_entry_point_per_family():
    hubconf = load_script(REPO / "hubconf.py")
    assert hubconf.dependencies == ["torch"]
    assert {name for name in vars(hubconf) if callable(vars(hubconf)[name]) and not name.startswith("_")} == set(registered_models())
    assert "pretrained=NAME" in hubconf.dbm.__doc__
