"""The objective interface the Trainer calls: loss (required), prepare (a no-op unless overridden), check."""

from functools import partial

import pytest
import torch
from torch import nn

from pfzoo.data import DataSplits
from pfzoo.models import RBM, LinearGenerative
from pfzoo.training import CD, EMHMC, MPF, PCD, BitFlipMPF, DBMPersistentMeanField, Objective, PersistentMPF, PseudoLikelihood, Trainer


def test_an_objective_must_define_its_loss():
    class NoLoss(Objective):
        pass

    with pytest.raises(TypeError, match="loss"):
        NoLoss()


def test_prepare_is_a_no_op_and_only_an_override_makes_an_objective_epoch_stateful():
    assert CD().prepare(RBM(4, 2), torch.zeros(3, 4)) is False
    stateless = [CD, PCD, BitFlipMPF, PseudoLikelihood]
    stateful = [MPF, PersistentMPF, EMHMC, DBMPersistentMeanField]
    assert [cls.epoch_stateful for cls in stateless] == [False] * 4
    assert [cls.epoch_stateful for cls in stateful] == [True] * 4

    class Refreshing(CD):
        def prepare(self, model, train, *, generator=None):
            return True

    assert Refreshing.epoch_stateful and not CD.epoch_stateful


def test_the_trainer_takes_objectives_only(tmp_path):
    class LooseLoss(nn.Module):
        def loss(self, model, batch, *, generator=None):
            return model.free_energy(batch).mean()

    with pytest.raises(ValueError, match="objective must be a pfzoo.training.Objective"):
        Trainer(LooseLoss(), run_dir=tmp_path)


def test_the_default_projection_leaves_the_parameters_alone_and_a_constrained_model_projects_every_step(tmp_path):
    model = RBM(4, 2, generator=torch.Generator().manual_seed(0))
    before = {name: value.clone() for name, value in model.state_dict().items()}
    model.project_parameters()
    assert all(torch.equal(before[name], value) for name, value in model.state_dict().items())
    data = LinearGenerative(3, 2, generator=torch.Generator().manual_seed(1)).sample(40, generator=torch.Generator().manual_seed(1)) * 10
    splits = DataSplits("big", train=data, test=data[:5])
    norms = {}
    for bound in (None, 0.5):
        generative = LinearGenerative(3, 2, max_basis_norm=bound, generator=torch.Generator().manual_seed(0))
        Trainer(EMHMC(num_hmc_steps=1), partial(torch.optim.Adam, lr=0.5), run_dir=tmp_path / str(bound), epochs=1, batch_size=10,
                progress=False).fit(generative, splits)
        norms[bound] = generative.basis.detach().norm(dim=0).max().item()
    assert norms[None] > 0.5 and norms[0.5] == pytest.approx(0.5)  # the step left the bound; the projection came back to it
