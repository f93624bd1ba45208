"""Generalized score matching for binary data (Lyu 2009, as corrected for binary data by Marlin, Swersky, Chen & de Freitas 2010).

Lyu (2009) generalises score matching by replacing the gradient with a linear operator L and matching ``Lp / p``, which
like the score is free of the partition function. For discrete data he takes the marginalization operator
``(Mp)_j(x) = Σ_y p(y, x_{−j}) = p(x_{−j})``, whose "score" is ``(Mp)_j(x) / p(x) = 1 / p(x_j | x_{−j})``, and the
divergence

    D(p ‖ q_θ) = ½ E_{x~p} Σ_j ( 1/p(x_j | x_{−j}) − 1/q_θ(x_j | x_{−j}) )²,

zero only when every conditional matches, hence (for positive p) only at ``q_θ = p``. Expanding the square, the term
``½ E_p[1/p_j²]`` is a constant and the cross term is the adjoint of M applied to the model's score:

    E_p[ 1 / (p(x_j | x_{−j}) q_θ(x_j | x_{−j})) ] = Σ_{x_{−j}} p(x_{−j}) Σ_{y ∈ {0,1}} 1/q_θ(y | x_{−j})
                                                 = E_p[ 1/q_j + 1/(1 − q_j) ],

a sum over *both* values of unit j (taking the adjoint as the identity, i.e. keeping only ``1/q_j``, gives an
objective whose minimiser is not the model: r/(1 − r) = (π/(1 − π))^¼ for a single conditional). So, up to that
constant, with ``q_nj = q_θ(x_nj | x_n,−j) = σ(g_nj)`` and the flip gaps ``g_nj = F(x_n⁽ʲ⁾) − F(x_n)``
(:meth:`~pfzoo.models.EnergyModel.flip_free_energy_gaps`, the hidden units summed out in F),

    L(θ) = (1/B) Σ_n Σ_j [ ½ q_nj⁻² − q_nj⁻¹ (1 − q_nj)⁻¹ ]
         = (1/B) Σ_n Σ_j [ ½ e^{−2 g_nj} − e^{g_nj} − 3/2 ]

(``1/σ(g) = 1 + e^{−g}``, ``1/σ(−g) = 1 + e^{g}``). Its expectation under the generating model is stationary there
(tests/training/test_generalized_score_matching.py checks it by enumeration, and that the identity-adjoint form is not).

Unlike ratio matching's, these terms are not bounded below: ``−e^{g}`` falls without bound as a data state's free
energy drops below its neighbour's. The expectation under a positive distribution is bounded, since the neighbour is
itself a data state with weight ``p(x⁽ʲ⁾)`` whose term ``½ e^{2g}`` grows faster; a finite sample in which unit j's other
value never occurs in some context (an always-off border pixel of a digit) has no minimiser, and the parameters of that
unit drift off as long as training runs — why "GSM does not work in high dimensional discrete spaces where the observed
probability of many events is 0" (Deep Learning §18.4.1, after Marlin et al.). The loss is summed in float64 so that
the exponentials of such drifting gaps stay finite longer.
"""

from __future__ import annotations

import torch

from pfzoo.training.objective import Objective
from pfzoo.training.pseudolikelihood import missing_binary_free_energy


class GeneralizedScoreMatching(Objective):
    """Minimise the generalized score matching loss for binary data ``(1/B) Σ_n Σ_j [½ e^{−2g_nj} − e^{g_nj} − 3/2]``,
    ``g_nj = F(x_n⁽ʲ⁾) − F(x_n)`` (module docstring): deterministic, so full-batch L-BFGS applies; a float64 scalar."""

    config_name = "generalized_score_matching"
    missing = staticmethod(missing_binary_free_energy)

    def example_losses(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Each row's loss ``Σ_j [½ e^{−2g_nj} − e^{g_nj} − 3/2]`` for binary ``batch [B, D]`` → float64 ``[B]``."""
        self.check_outside_fit(model)  # binary states with an exact free energy, refused in one line otherwise
        model.check_visible(batch, "batch")
        gaps = model.flip_free_energy_gaps(batch).double()
        return (0.5 * torch.exp(-2 * gaps) - torch.exp(gaps) - 1.5).sum(1)

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """The GSM loss per example of binary ``batch [B, D]`` (float64 scalar): the mean of :meth:`example_losses`."""
        return self.example_losses(model, batch).mean()
