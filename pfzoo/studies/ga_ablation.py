"""Which training setting makes the geometric path underestimate log Z of a CD1(500) MNIST RBM (the slides' claim).

Grosse, Maddison & Salakhutdinov's slides ("Estimating Partition Functions of RBMs") show AIS along the geometric
path (GA, θ(β) = (1 − β) θ_0 + β θ_1) falling about 20 nats short of log Z on an RBM with 500 hidden units trained on
MNIST with CD1, where the moment-averaged spline (MAS: knots whose moments are the averages
s(β) = (1 − β) s(0) + β s(1), GA between them) does not. On the zoo's CD1(500) both paths agree. This study trains
CD1(500) RBMs that differ from the zoo's recipe in one setting each (:data:`VARIANTS`) and measures on each:

- :func:`path_runs`: GA and MAS log Ẑ from the uniform base and from the data base rates at each K (same number of
  chains and seed for every path and start; :func:`pfzoo.estimators.path_ais.anneal_path`);
- :func:`raise_check`: RAISE from the base rates on test digits, a stochastic lower bound on the annealing model's
  test log-likelihood, beside the test log-likelihood each log Ẑ implies (``mean log f(v_test) − log Ẑ``): an
  estimate whose implied log-likelihood sits far above RAISE has a log Ẑ that falls short;
- :func:`shortfalls`: every run's distance below the largest log Ẑ measured on that model. AIS's log Ẑ is a stochastic
  lower bound on log Z (E[log Ẑ] ≤ log Z, Jensen on the unbiased Ẑ), so a run far below another one on the same
  model underestimates, whichever the true value is;
- :func:`cause`: the variant whose one changed setting opens the largest GA shortfall from the uniform base.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace

import torch

from pfzoo import paths
from pfzoo.estimators import RAISE
from pfzoo.estimators.path_ais import anneal_path
from pfzoo.studies.spline_ablation import MomentCache, SplineSetting, build_spline

RECIPE = "raise_rbm_cd1_500"
"""The zoo CD1(500)'s experiment recipe (lr 0.05, momentum 0.9, weight decay 2·10⁻⁴, 60 epochs, batch 100, CD-1,
weights N(0, 0.01²), visible biases at the base-rate logits)."""
CENTRE_EPOCHS = 5
"""Epochs of the ablation's centre: the zoo's recipe stopped early, so that each one-setting variant trains in minutes."""


@dataclass(frozen=True)
class Variant:
    """One RBM of the ablation. overrides: the training recipe's Hydra overrides over :data:`RECIPE` (``None``: the
    zoo's own checkpoint); changed: the one setting that differs from ``relative_to`` (the variant it is compared with),
    in words; zoo: the zoo folder."""

    changed: str
    overrides: tuple[str, ...] | None = None
    zoo: str | None = None
    relative_to: str = "centre"

    def slug(self, name: str) -> str:
        """``name`` as a run folder's name (Hydra's override grammar refuses brackets and spaces)."""
        return re.sub(r"[^0-9A-Za-z.]+", "-", name).strip("-")


_CENTRE = (f"trainer.epochs={CENTRE_EPOCHS}",)
VARIANTS: dict[str, Variant] = {
    "centre": Variant(f"none: the zoo's recipe stopped after {CENTRE_EPOCHS} epochs", _CENTRE),
    "60 epochs": Variant("epochs 60, not 5 (the zoo's own CD1(500))", zoo="rbm-binarized_mnist-cd1-500"),
    "visible biases 0": Variant("visible biases start at 0, not at the base-rate logits", (*_CENTRE, "init_from_data=false")),
    "weights N(0, 0.1²)": Variant("initial weights N(0, 0.1²), not N(0, 0.01²)", (*_CENTRE, "model.init_std=0.1")),
    "momentum 0.5": Variant("momentum 0.5, not 0.9", (*_CENTRE, "trainer.optimizer.momentum=0.5")),
    "no weight decay": Variant("weight decay 0, not 2·10⁻⁴", (*_CENTRE, "trainer.weight_decay=0.0")),
    "lr 0.005": Variant("learning rate 0.005, not 0.05", (*_CENTRE, "trainer.optimizer.lr=0.005")),
    "CD-10": Variant("CD-10, not CD-1", (*_CENTRE, "trainer.objective.k=10")),
    "60 epochs, visible biases 0": Variant("visible biases start at 0, not at the base-rate logits (60 epochs, against the zoo's own)",
                                           ("init_from_data=false",), relative_to="60 epochs"),
}
"""Name → variant: each changes one training setting of the centre (the zoo's recipe at 5 epochs), or of the zoo's own
CD1(500) where ``relative_to`` says so."""
SPLINE = SplineSetting("moments from data", "target-moment chains start at 1,000 training examples", model="", moment_start="data")
"""The MAS builder's settings: 5 evenly spaced knots fitted by 300 PCD iterations of 1,000 chains to target moments
from 1,000 Gibbs chains started at training examples (1,000 burn-in, 100 averaged sweeps); the spline ablation
(reports/paths/spline_ablation.md) found chains started at uniform noise miss the target's mass."""
BASES = ("uniform", "base_rate")
PATHS = {"GA": "geometric", "MAS": "moment_averaged"}
SEED_CLAIMS = {"slides_ga_shortfall": 20.0, "raise_ais_uniform": -106.52, "raise_ais_base_rate": -124.09, "raise_raise_base_rate": -124.77,
               "raise_raise_uniform": -150.78}
"""The slides' ~20-nat GA shortfall on their CD1(500), and RAISE Table 1's mnistCD1-500 (K = 10⁵, the same RBMs as
Grosse et al. 2013 per RAISE §5.1): mean test log-probabilities by GA AIS and RAISE from each base."""


def path_runs(model, data: torch.Tensor, steps: list[int], chains: int, *, seed: int = 0, kinds=("GA", "MAS"), bases=BASES,
              spline: SplineSetting = SPLINE, name: str = "model") -> list[dict]:
    """AIS log Ẑ of ``model`` along each path of ``kinds`` from each of ``bases`` at every K of ``steps`` (linear
    schedule, ``chains`` chains, generator seeded ``seed``): rows ``{path, base, steps, log_z, stderr, ess,
    mean_log_weight, seconds}``, the first row of each path and base also its ``build_seconds``. ``data [N, V]``: the
    training digits (the base rates; MAS's target-moment chains start at them)."""
    rows, cache = [], MomentCache()
    setting = replace(spline, model=name)  # the moment cache is keyed by the model's name
    for kind in kinds:
        for base in bases:
            began = time.perf_counter()
            with torch.no_grad():
                if kind == "GA":
                    path, _ = paths.build(model, kind="geometric", base=base, data=data)
                else:
                    path, _, _ = build_spline(model, setting, data, cache, base=base, seed=seed)
            build = round(time.perf_counter() - began, 1)
            for k in steps:
                began = time.perf_counter()
                run = anneal_path(path, "linear", k, chains, generator=torch.Generator(device=model.device).manual_seed(seed))
                rows.append({"path": kind, "base": base, "steps": k, "log_z": run.log_z, "stderr": run.stderr, "ess": run.ess,
                             "mean_log_weight": run.mean_log_weight, "seconds": round(time.perf_counter() - began, 1)}
                            | ({"build_seconds": build} if k == steps[0] else {}))
    return rows


def shortfalls(rows: list[dict]) -> dict:
    """Each run's log Ẑ below the largest on the model (``reference``: that run's path, base, K, log Ẑ and stderr),
    keyed ``"<path> <base> <K>"``, with the combined stderr of the two. The largest is the least biased: each log Ẑ is a
    stochastic lower bound on the same log Z."""
    best = max(rows, key=lambda r: r["log_z"])
    out = {f"{r['path']} {r['base']} {r['steps']}": {"shortfall": best["log_z"] - r["log_z"], "stderr": (best["stderr"] ** 2 + r["stderr"] ** 2) ** 0.5}
           for r in rows}
    return {"reference": {k: best[k] for k in ("path", "base", "steps", "log_z", "stderr")}, "runs": out}


def raise_check(model, data_train: torch.Tensor, test: torch.Tensor, rows: list[dict], *, steps: int, chains: int, digits: int,
                seed: int = 0) -> dict:
    """RAISE from the base rates at K = ``steps`` (``chains`` reverse chains on ``digits`` random rows of ``test [M, V]``,
    control variates for the full-set mean) beside the mean test log-likelihood ``mean log f(test) − log Ẑ`` each run of
    ``rows`` implies: RAISE is a stochastic lower bound on the annealing model's log-likelihood, so an implied value far
    above it comes from a log Ẑ that falls short (RAISE §3)."""
    g = torch.Generator(device=model.device).manual_seed(seed)
    shuffled = test[torch.randperm(test.shape[0], generator=torch.Generator().manual_seed(seed + 7))]
    began = time.perf_counter()
    estimate = RAISE(chains, steps, base="base_rate", num_examples=digits).log_likelihood(model, shuffled, base_data=data_train, generator=g)
    with torch.no_grad():
        mean_log_f = model.unnormalized_log_prob(test.to(model.weight)).double().mean().item()
    implied = {f"{r['path']} {r['base']} {r['steps']}": mean_log_f - r["log_z"] for r in rows}
    return {"raise_base_rate": {"mean": estimate.mean, "stderr": estimate.stderr, "steps": steps, "chains": chains, "digits": digits,
                                "seconds": round(time.perf_counter() - began, 1)},
            "mean_log_f_test": mean_log_f, "implied_test_log_likelihood": implied}


def ga_uniform_shortfall(entry: dict) -> tuple[float, float, int] | None:
    """``(shortfall, stderr, K)`` of GA from the uniform base at the largest K measured on an entry, or ``None``."""
    found = [(int(key.split()[-1]), v) for key, v in entry["shortfalls"]["runs"].items() if key.startswith("GA uniform ")]
    if not found:
        return None
    k, value = max(found, key=lambda item: item[0])
    return value["shortfall"], value["stderr"], k


def cause(entries: dict[str, dict], *, threshold: float = 3.0, relative_to: dict[str, str] | None = None) -> dict:
    """The variant (name → entry with ``shortfalls``) whose changed setting moves GA's uniform-start shortfall furthest
    above that of the variant it is compared with (``relative_to``: name → name, default the centre), and every
    variant's move; a move counts where it exceeds ``threshold`` combined stderrs and 1 nat. Returns ``{"centre",
    "moves": {name: {shortfall, stderr, steps, move, relative_to, significant}}, "cause": name or None}``."""
    if "centre" not in entries:
        raise ValueError(f"entries must hold the 'centre' variant, got {sorted(entries)}")
    relative_to = relative_to or {}
    centre = ga_uniform_shortfall(entries["centre"])
    moves = {}
    for name, entry in entries.items():
        found, other = ga_uniform_shortfall(entry), relative_to.get(name, "centre")
        if found is not None and name != "centre" and other in entries:
            (shortfall, stderr, k), (base, base_stderr, _) = found, ga_uniform_shortfall(entries[other])
            moves[name] = {"shortfall": shortfall, "stderr": stderr, "steps": k, "move": shortfall - base, "relative_to": other,
                           "significant": shortfall - base > max(1.0, threshold * (stderr ** 2 + base_stderr ** 2) ** 0.5)}
    significant = {name: m for name, m in moves.items() if m["significant"]}
    return {"centre": {"shortfall": centre[0], "stderr": centre[1], "steps": centre[2]}, "moves": moves,
            "cause": max(significant, key=lambda n: significant[n]["move"]) if significant else None}


@torch.no_grad()
def parameter_summary(model, data: torch.Tensor) -> dict:
    """Where a trained RBM's parameters sit, against ``data [N, V]``: the mean visible bias over the pixels never on in
    ``data`` and over the rest, the mean hidden bias, the weights' RMS, and the mean of ``W`` over the never-on pixels'
    rows. A pixel never on in the data has base-rate logit −∞ (smoothed: about −log N); how far its bias got from 0 says
    how strongly the model itself keeps it off."""
    never = data.sum(0) == 0
    bias = model.visible_bias.double()
    return {"never_on_pixels": int(never.sum()), "visible_bias_never_on": bias[never].mean().item(), "visible_bias_others": bias[~never].mean().item(),
            "hidden_bias": model.hidden_bias.double().mean().item(), "weight_rms": model.weight.double().square().mean().sqrt().item(),
            "weight_never_on": model.weight.double()[never].mean().item()}
