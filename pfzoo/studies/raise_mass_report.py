"""What ``scripts/diagnose_raise_mass.py`` measures per RBM and the ``reports/raise_mass`` README it renders.

:func:`measure` runs, on one binary MNIST RBM, the forward annealings and draws of :mod:`pfzoo.studies.raise_mass`
(RAISE Figure 5's p_ann against the RBM, the mass on the most probable hidden configuration, uniform against base-rate
starts) and returns a JSON-ready entry with the sample grids of the picture; :func:`readme` renders the report from
results.json alone.
"""

from __future__ import annotations

import math
import time

import torch

from pfzoo.data import DataSplits
from pfzoo.estimators import RAISE
from pfzoo.studies.raise_mass import annealed_states, annealing_summary, draw_summary, estimated_mass, exact_mass, mode_search, resample

SETTINGS = {"steps": 10_000, "chains": 200, "fig_steps": 10, "fig_draws": 2000, "images": 16, "raise_digits": 20, "raise_chains": 10,
            "fig_raise_digits": 500, "gibbs_sweeps": 10_000}
"""K and chains of the AIS runs from each base; Figure 5's K for p_ann (the paper's 10) and the draws summarised at it;
images per panel; RAISE from the uniform base at K on ``raise_digits`` random test digits (control variates) with
``raise_chains`` chains each, and from the base rates at ``fig_steps`` on ``fig_raise_digits``; Gibbs sweeps of the
long-chain picture panel for models too large to sample exactly."""
QUICK = {"steps": 50, "chains": 20, "fig_draws": 100, "raise_digits": 5, "raise_chains": 2, "fig_raise_digits": 10, "gibbs_sweeps": 20}
"""What a smoke run puts over :data:`SETTINGS`."""
ZOO = {"cd1-20": "rbm-binarized_mnist-cd1-20", "cd1-500": "rbm-binarized_mnist-cd1-500"}
"""The zoo's CD-1 RBMs measured (name → folder in ``models/``): the paper's Figure 5 model and its Figure 3–4 model."""
ABLATIONS = {
    "cd1-20-10-epochs": ("raise_cd1_10_epochs", [], "the zoo's CD1(20) recipe stopped after 10 epochs"),
    "cd1-20-momentum-0.5": ("raise_cd1_momentum_0_5", [], "CD1(20): lr 0.1, momentum 0.5, no weight decay, 5 epochs"),
    "cd1-500-5-epochs": ("raise_rbm_cd1_500", ["trainer.epochs=5"], "the zoo's CD1(500) recipe stopped after 5 epochs"),
    "cd1-500-momentum-0.5": ("raise_rbm_cd1_500", ["trainer.optimizer.lr=0.1", "trainer.optimizer.momentum=0.5", "trainer.weight_decay=0.0",
                                                   "trainer.epochs=5"], "CD1(500): lr 0.1, momentum 0.5, no weight decay, 5 epochs"),
}
"""Training settings changed one group at a time (name → experiment recipe, overrides, description): CD-1 RBMs trained
less or with the test suite's CD-1 settings, to see which training makes an RBM concentrate its mass."""
PAPER = {"cd1-20": {"exact": -164.50, "mode_mass": 0.93}, "cd1-500": {"raise_uniform": -150.78, "ais_uniform": -106.52, "raise_base_rate": -124.77,
                                                                      "ais_base_rate": -124.09}}
"""RAISE Table 1 and §5.1 (K = 10⁵): what the paper reports for its mnistCD1-20 and mnistCD1-500 RBMs."""


@torch.no_grad()
def measure(model, data: DataSplits, s: dict, seed: int) -> tuple[dict, dict[str, torch.Tensor]]:
    """One RBM's entry: exact mass and test log-likelihood where the hidden layer can be enumerated; AIS from the base
    rates and from uniform (K = ``steps``) with the mass read from each one's weighted end states; the draws of the RBM,
    of p_ann from the base rates at Figure 5's K, and of p_ann from uniform at K, against the RBM's most probable
    configuration; RAISE from uniform at K and from the base rates at Figure 5's K; the modes ascent reaches from outside
    the annealing (:func:`search_modes`). Also the picture's grids
    (``name → [images, V]``, each the means p(v | h) of a draw's hidden state)."""
    g = torch.Generator(device=model.device).manual_seed(seed)
    began, entry = time.perf_counter(), {"config": model.config()}
    digits = data.test[torch.randperm(data.test.shape[0], generator=torch.Generator().manual_seed(seed + 7))]
    if model.num_hidden <= 24:
        entry["exact"] = exact_mass(model) | {"test_log_likelihood": model.log_prob(data.test).mean().item()}
    runs = {base: annealed_states(model, s["chains"], s["steps"], base=base, base_data=data.train, generator=g) for base in ("base_rate", "uniform")}
    for base, (visible, log_weights) in runs.items():
        entry[base] = annealing_summary(model, visible, log_weights, data.test)
    log_z = entry["exact"]["log_z"] if "exact" in entry else entry["base_rate"]["log_z"]
    hidden = {base: model.sample_h_given_v(visible, generator=g) for base, (visible, _) in runs.items()}
    for base, (_, log_weights) in runs.items():
        entry[base]["mass"] = estimated_mass(model, hidden[base], log_weights, log_z)
    mode = torch.tensor(entry["exact"]["mode"] if "exact" in entry else entry["base_rate"]["mass"]["mode"], dtype=model.dtype)
    rbm_visible = model.exact_samples(s["fig_draws"], generator=g)
    rbm_label = "RBM: exact draws"
    if rbm_visible is None:
        rbm_visible, rbm_label = resample(*runs["base_rate"], s["fig_draws"], g), f"RBM: base-rate AIS (K = {s['steps']:,}),\nstates resampled by weight"
    ann_visible, _ = annealed_states(model, s["fig_draws"], s["fig_steps"], base="base_rate", base_data=data.train, generator=g)
    draws = {"rbm": rbm_visible, "p_ann_base_rate_fig": ann_visible, "p_ann_uniform": runs["uniform"][0]}
    draws_hidden = {name: model.sample_h_given_v(visible, generator=g) for name, visible in draws.items()}
    entry["draws"] = {name: draw_summary(model, h, mode) for name, h in draws_hidden.items()} | {"rbm_how": rbm_label.replace("\n", " ")}
    for key, base, steps, count in (("raise_uniform", "uniform", s["steps"], s["raise_digits"]),
                                    ("raise_base_rate_fig", "base_rate", s["fig_steps"], s["fig_raise_digits"])):
        estimate = RAISE(s["raise_chains"], steps, base=base, num_examples=count).log_likelihood(model, digits, base_data=data.train, generator=g)
        entry[key] = {"mean": estimate.mean, "stderr": estimate.stderr, "steps": steps, "digits": count}
    images = s["images"]
    grids = {rbm_label: model.visible_probs(draws_hidden["rbm"][:images]),
             f"p_ann: base rates, K = {s['fig_steps']}": model.visible_probs(draws_hidden["p_ann_base_rate_fig"][:images]),
             f"p_ann: uniform, K = {s['steps']:,}": model.visible_probs(draws_hidden["p_ann_uniform"][:images])}
    if "exact" not in entry:
        chain = model.sample(images, num_steps=s["gibbs_sweeps"], generator=g)
        grids[f"RBM: Gibbs chains,\n{s['gibbs_sweeps']:,} sweeps from noise"] = model.visible_probs(model.sample_h_given_v(chain, generator=g))
    entry["mode_search"] = search_modes(model, data, entry)
    entry["seconds"] = round(time.perf_counter() - began, 1)
    return entry, grids


def mode_images(model, entry: dict) -> dict[str, torch.Tensor]:
    """Panels of p(v | h) (``[1, V]`` each) for the RBM's most probable hidden configuration (exact, else the best the
    mode search reached) and for the best one the base-rate AIS draws reach, titled with their masses."""
    found = entry["exact"] if "exact" in entry else entry["mode_search"]
    top = found["top_masses"][0] if "exact" in entry else found["mode_mass"]
    drawn = entry["base_rate"]["mass"]
    panels = {("most probable h (exact)" if "exact" in entry else "best h by ascent") + f",\n{_share(top, math.log10(max(top, 1e-300)))} of the mass": found["mode"],
              f"best h of the base-rate AIS draws,\n{_share(drawn['mode_mass'], drawn['mode_log10_mass'])} of the mass": drawn["mode"]}
    return {title: model.visible_probs(torch.tensor([mode], dtype=model.dtype, device=model.device)) for title, mode in panels.items()}


def search_modes(model, data: DataSplits, entry: dict, seed: int = 0) -> dict:
    """:func:`~pfzoo.studies.raise_mass.mode_search` from h = 0, h = 1 and training digits, against the entry's log Z (exact
    where measured, else base-rate AIS's), and where the RBM's mass lies in pixel space: the mean number of pixels on in
    256 of its draws (exact, else Gibbs chains of 1,000 sweeps from noise) against the test digits', and the mass p(v = 0) of
    the blank image (log₁₀). For an entry stored before the search existed, too (it needs only the model)."""
    g = torch.Generator(device=model.device).manual_seed(seed + 11)
    draws = model.exact_samples(256, generator=g)
    how = "exact draws" if draws is not None else "Gibbs chains, 1,000 sweeps from noise"
    draws = model.sample(256, num_steps=1000, generator=g) if draws is None else draws
    found = mode_search(model, data.train, entry["exact"]["log_z"] if "exact" in entry else entry["base_rate"]["log_z"])
    blank = (model.unnormalized_log_prob(torch.zeros(1, model.num_visible, dtype=model.dtype, device=model.device)).double().item()
             - (entry["exact"]["log_z"] if "exact" in entry else entry["base_rate"]["log_z"])) / math.log(10)
    return found | {"rbm_pixels_on": draws.sum(1).mean().item(), "rbm_pixels_how": how, "data_pixels_on": data.test.sum(1).mean().item(),
                    "blank_mass": 10**blank, "blank_log10_mass": blank}



def _mass(entry: dict) -> tuple[str, str, str]:
    """(top-1 mass, top-10 mass, entropy of p(h)) cells: exact by enumeration where measured, else read from the weighted
    end states of base-rate AIS."""
    if "exact" in entry:
        exact = entry["exact"]
        return f"{100 * exact['top_masses'][0]:.1f} %", f"{100 * exact['top_total']:.1f} %", f"{exact['entropy']:.2f} (exact)"
    mass = entry["base_rate"]["mass"]
    return (_share(mass["mode_mass"], mass["mode_log10_mass"]), "—", f"{mass['entropy']:.0f} ± {mass['entropy_stderr']:.0f} (ESS {mass['ess']:.0f} of {mass['draws']})")


def _share(mass: float, log10_mass: float) -> str:
    return f"{100 * mass:.1f} %" if mass >= 1e-3 else f"10^{log10_mass:.0f}"


def _searched(entry: dict) -> str:
    found = entry.get("mode_search")
    return "—" if found is None else f"{_share(found['mode_mass'], found['mode_log10_mass'])} ({found['distinct_maxima']} maxima from {found['starts']} starts)"


def _draws(draws: dict) -> str:
    return f"{100 * draws['mode_share']:.1f} %; {draws['distinct']:,} of {draws['draws']:,}; {draws['mean_log_f_h']:.1f}"


def _label(name: str) -> str:
    return f"zoo {name}" if name in ZOO else f"{name}: {ABLATIONS[name][2]}"


def _likelihood(entry: dict) -> str:
    return f"{entry['exact']['test_log_likelihood']:.2f} (exact)" if "exact" in entry else f"{entry['base_rate']['test_log_likelihood']:.2f} (AIS, base rates)"


def readme(results: dict, sweep: dict | None = None, paper_scale: dict | None = None) -> str:
    """The report's README.md from results.json alone; ``sweep``: the uniform-start AIS/RAISE sweep of the zoo's CD1(500)
    from ``estimators/raise/results.json`` (its rows are quoted where it reaches K = 10⁵); ``paper_scale``: that model's
    entry in ``estimators/raise/paper_scale/results.json`` (uniform AIS and RAISE at RAISE Table 1's chains)."""
    s, models = results["settings"], results["models"]
    lines = ["# RAISE Figure 5 and the mass diagnosis: why our CD1 RBMs agree from a uniform start", "",
             "Burda, Grosse & Salakhutdinov (2015), §5.1: their mnistCD1-20 RBM put 93 % of its probability mass on a single hidden "
             "configuration, and RAISE exceeded AIS at small K from the data base rates because the annealing model p_ann fits the "
             "test digits better than that RBM (Figure 5: 10 samples of each, p_ann with K = 10). Their mnistCD1-500 RBM gave the "
             "largest AIS − RAISE gap, 44.26 nats from a uniform start at K = 10⁵ (AIS −106.52, RAISE −150.78; from the base rates "
             "−124.09 and −124.77; Table 1, Figure 4). The paper states the 93 % for the CD1-20 RBM, not for CD1-500. "
             "Generated by `scripts/diagnose_raise_mass.py`; raw numbers in `results.json`.", "",
             "## Figure 5: samples of p_ann beside the RBM", ""]
    for name in (name for name in models if name in ZOO):
        lines += [f"![{name}: the RBM beside p_ann](figures/{name}-samples.png) ![{name}: its most probable hidden configurations](figures/{name}-modes.png)", ""]
    lines += [("Each panel shows p(v | h) for the hidden state h ~ p(h | v) of its first draws: the RBM's own draws (exact by "
               "enumerating the hidden layer, or base-rate AIS end states resampled by their weights), p_ann's end states from the "
               f"base rates at K = {s['fig_steps']} (the paper's Figure 5 setting), p_ann's from uniform at K = {s['steps']:,}, and for "
               "the 500-unit models Gibbs chains run from noise."), "",
              f"| model | RBM's draws | p_ann, base rates, K = {s['fig_steps']} | p_ann, uniform, K = {s['steps']:,} | "
              f"RAISE, base rates, K = {s['fig_steps']} | test log-likelihood |", "|---|---:|---:|---:|---:|---:|"]
    for name, entry in models.items():
        lines.append(f"| {_label(name)} | " + " | ".join(_draws(entry["draws"][key]) for key in ("rbm", "p_ann_base_rate_fig", "p_ann_uniform"))
                     + f" | {entry['raise_base_rate_fig']['mean']:.2f} ± {entry['raise_base_rate_fig']['stderr']:.2f} | {_likelihood(entry)} |")
    lines += ["", ("Each draw cell: the share of the draws whose h equals the RBM's most probable configuration, the distinct "
                   "configurations among them, and their mean log f(h). RAISE on "
                   f"{s['fig_raise_digits']} random test digits × {s['raise_chains']} chains (control variates): a stochastic lower bound "
                   "on p_ann's test log-likelihood, so RAISE above the RBM's exact value means p_ann fits the digits better than the RBM."),
              "", "## Mass on the most probable hidden configuration", "",
             "| model | test log-likelihood | mass on the top h | on the top 10 | entropy of p(h), nats | best h by ascent from h = 0, 1, digits | measured |",
             "|---|---:|---:|---:|---:|---:|---|",
             f"| paper: mnistCD1-20 | {PAPER['cd1-20']['exact']:.2f} (exact) | {100 * PAPER['cd1-20']['mode_mass']:.0f} % | — | — | — | RAISE §5.1 |"]
    for name, entry in models.items():
        lines.append(f"| {_label(name)} | {_likelihood(entry)} | " + " | ".join(_mass(entry)) + f" | {_searched(entry)} | {entry['measured_on']}, "
                     f"{entry['seconds'] / 60:.1f} min |")
    lines += ["", (f"Exact rows enumerate the 2^H hidden configurations: p(h) = f(h)/Z with log f(h) = c·h + Σ_i softplus((Wh + b)_i). For 500 "
                   f"hidden units the entropy is log Z − E_p[log f(h)] over h ~ p(h | v) drawn at the end states of base-rate AIS (K = "
                   f"{s['steps']:,}, {s['chains']} chains) weighted by their importance weights (± the self-normalised weights' error, log Z "
                   "held fixed), and the top mass is f(h*)/Z for the best local maximum h* that steepest single-flip ascent of log f reaches "
                   "from the 32 highest draws: a lower bound on the top configuration's mass, printed as a power of ten. The mode search "
                   "climbs the same way from h = 0, h = 1 and the most probable h of 64 training digits, outside any annealing run."), "",
              "Each model's p(v | h) for its most probable h and for the best h its base-rate AIS draws reach: "
              + ", ".join(f"[{name}](figures/{name}-modes.png)" for name in models) + ".", "",
              "## Uniform against base-rate starts", "",
              "| model | log Ẑ, base rates (ESS) | log Ẑ, uniform (ESS) | uniform − base rates | AIS, uniform | RAISE, uniform | AIS − RAISE, uniform |",
              "|---|---:|---:|---:|---:|---:|---:|",
              "| paper: mnistCD1-500, K = 10⁵ | — | — | — | −106.52 | −150.78 | +44.26 |"]
    for name, entry in models.items():
        base, uniform, lower = entry["base_rate"], entry["uniform"], entry["raise_uniform"]
        lines.append(f"| {_label(name)} | {base['log_z']:.2f} ± {base['log_z_stderr']:.2f} ({base['ess']:.0f}) | {uniform['log_z']:.2f} ± "
                     f"{uniform['log_z_stderr']:.2f} ({uniform['ess']:.0f}) | {uniform['log_z'] - base['log_z']:+.2f} | {uniform['test_log_likelihood']:.2f} | "
                     f"{lower['mean']:.2f} ± {lower['stderr']:.2f} | {uniform['test_log_likelihood'] - lower['mean']:+.2f} |")
    long = [row for row in (sweep or {}).get("rows", []) if row["steps"] == 100_000]
    lines += ["", (f"K = {s['steps']:,}, linear β, block Gibbs, {s['chains']} AIS chains from each start (the same chains give the "
                   f"pictures' p_ann); RAISE on {s['raise_digits']} random test digits × {s['raise_chains']} chains, full-set mean by "
                   "control variates. A uniform log Ẑ below the base-rate one means the chains from uniform miss mass the RBM has.")]
    if long:
        row = long[0]
        lines += ["", (f"The zoo's CD1(500) at the paper's K = 10⁵ from uniform (`estimators/raise/table.md`, {sweep['settings']['sweep_ais_chains']} AIS "
                       f"chains, RAISE {sweep['settings']['raise_chains']} chains × {sweep['settings']['sweep_raise_examples']} digits, measured "
                       f"{row.get('measured_on', sweep.get('measured_on'))}): AIS {row['ais']:.2f} ± {row['ais_stderr']:.2f}, RAISE {row['raise']:.2f} ± "
                       f"{row['raise_stderr']:.2f}, gap {row['ais'] - row['raise']:+.2f} nats (the paper's: +44.26).")]
    lines += verdict(models, s)
    cells = (paper_scale or {}).get("estimates", {})
    if "ais_uniform" in cells and "raise_uniform" in cells:
        ais, lower = cells["ais_uniform"], cells["raise_uniform"]
        lines += ["", (f"At RAISE Table 1's own settings (`estimators/raise/paper_scale/table.md`: K = 10⁵, AIS {ais['chains']:,} chains, RAISE 50 "
                       f"chains × 100 digits, measured {paper_scale['trained_on']}): AIS {ais['mean']:.2f} ± {ais['stderr']:.3f} (ESS {ais['ess']:,.0f}), "
                       f"RAISE {lower['mean']:.2f} ± {lower['stderr']:.2f}, gap {ais['mean'] - lower['mean']:+.2f} nats.")]
    return "\n".join(lines) + "\n"


def verdict(models: dict, s: dict) -> list[str]:
    """The report's reading of its own numbers: how much mass each RBM puts on its top hidden configuration, whether the
    annealing chains reach it, and whether a uniform start loses anything the base rates find."""
    lines = ["", "## What the numbers say", ""]
    for name, entry in models.items():
        base, uniform, draws, found = entry["base_rate"], entry["uniform"], entry["draws"], entry.get("mode_search")
        text = f"- **{_label(name)}**: "
        if "exact" in entry:
            exact = entry["exact"]
            short = exact["log_z"] - base["log_z"]
            reached = ("reach the top configuration" if base["mass"]["mode"] == exact["mode"] else
                       f"never reach the top configuration: the best they reach holds {100 * base['mass']['mode_mass']:.1f} %")
            text += (f"{100 * exact['top_masses'][0]:.1f} % of the mass on one hidden configuration, {100 * exact['top_total']:.1f} % on ten "
                     f"(the paper's mnistCD1-20: 93 % on one). Base-rate AIS at K = {s['steps']:,} ends {-short:+.2f} nats from the exact log Z "
                     f"(its Ẑ is {100 * math.exp(-short):.0f} % of Z), and its draws {reached}; p_ann from the base rates "
                     f"at K = {entry['raise_base_rate_fig']['steps']} puts {100 * draws['p_ann_base_rate_fig']['mode_share']:.1f} % of its draws on the top configuration "
                     f"against the RBM's {100 * draws['rbm']['mode_share']:.1f} %, over {draws['p_ann_base_rate_fig']['distinct']:,} distinct "
                     f"configurations against {draws['rbm']['distinct']:,}. RAISE from the base rates at that K: "
                     f"{entry['raise_base_rate_fig']['mean'] - exact['test_log_likelihood']:+.2f} nats from the exact test log-likelihood.")
        else:
            mass = base["mass"]
            text += (f"entropy of p(h) {mass['entropy']:.0f} ± {mass['entropy_stderr']:.0f} nats; the best configuration reached holds "
                     f"{_share(mass['mode_mass'], mass['mode_log10_mass'])} of the mass from the annealing draws"
                     + (f", {_share(found['mode_mass'], found['mode_log10_mass'])} by ascent from h = 0, 1 and digits" if found else "") + ".")
        if found and "blank_log10_mass" in found:
            text += (f" Its draws ({found['rbm_pixels_how']}) have {found['rbm_pixels_on']:.0f} pixels on, the test digits "
                     f"{found['data_pixels_on']:.0f}; the blank image alone holds {_share(10 ** found['blank_log10_mass'], found['blank_log10_mass'])} "
                     "of the mass.")
        text += (f" From uniform, log Ẑ is {uniform['log_z'] - base['log_z']:+.2f} nats from the base-rate one and AIS − RAISE is "
                 f"{uniform['test_log_likelihood'] - entry['raise_uniform']['mean']:+.2f} nats at K = {s['steps']:,}.")
        lines.append(text)
    return lines
