"""Why two *Deep Learning* §18 claims about training principles fail in ``reports/principles`` (issue 52): an ablation
that changes one setting of the principles study at a time and measures how far each moves our result toward the claim.

The claims (seed 002):

* §18.2, after Marlin et al. (2010): "if the RBM's hidden units are used as features for an SVM classifier, SML results
  in the best classification accuracy". Measured as the **SML margin**: the test accuracy of the PCD (SML) RBM's
  features minus the best accuracy among the other principles; the claim holds where it is positive.
* §18.3: pseudolikelihood "tends to perform poorly on tasks that require a good model of the full joint p(x), such as
  density estimation", and "can perform better than maximum likelihood for tasks that require only the conditional
  distributions used during training, such as filling in small amounts of missing values". Measured as two
  differences, pseudolikelihood minus SML (the maximum-likelihood principle we train): exact test log-likelihood (the
  claim: negative) and the squared error of the filled-in pixels (the claim: negative).

The settings it varies that need no new training are here: which pixels are missing (a ``block × block`` square, the
study's setting, or ``count`` pixels scattered at random), how they are filled (the study's mean-field iterations, or
the exact posterior mean ``E[v_miss | v_obs]`` by enumerating the ``2^k`` completions, which for one missing pixel is
exactly the conditional ``p(v_i | v_−i)`` pseudolikelihood fits), and the classifier on the hidden features (the
study's logistic regression at ``C = 1``, or logistic regression / a linear SVM / an RBF SVM with ``C`` chosen on a
validation fifth of the training rows).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Sequence

import torch

from pfzoo.models import RBM
from pfzoo.sampling import uniform
from pfzoo.studies.features import hidden_features
from pfzoo.studies.principles import classification_accuracy, exact_log_likelihood, hidden_blocks
from pfzoo.studies.reporting import with_kept_section

CLASSIFIERS = ("logistic", "linear_svm", "rbf_svm")
"""The classifiers :func:`classifier_accuracy` fits: scikit-learn's ``LogisticRegression``, ``LinearSVC`` and ``SVC``."""
MAX_EXACT_MISSING = 12  # 2^12 completions per image: the exact fill's cost grows as 2^k


def scattered_mask(num_images: int, num_pixels: int, count: int, generator: torch.Generator) -> torch.Tensor:
    """A mask ``[N, V]`` (bool) hiding ``count`` distinct pixels per image, drawn uniformly at random."""
    if not 1 <= count <= num_pixels:
        raise ValueError(f"count must be between 1 and the number of pixels {num_pixels}, got {count}")
    keys = uniform((num_images, num_pixels), generator=generator)
    chosen = keys.argsort(dim=1)[:, :count]  # a uniformly random subset: the ranks of i.i.d. uniforms
    return torch.zeros(num_images, num_pixels, dtype=torch.bool).scatter_(1, chosen, True)


def missing_mask(num_images: int, image_shape: tuple[int, int], pattern: dict[str, Any], generator: torch.Generator) -> torch.Tensor:
    """The mask ``[N, H·W]`` of a pattern: ``{"shape": "block", "size": s}`` (one random ``s × s`` square per image) or
    ``{"shape": "scattered", "count": k}`` (``k`` random pixels per image)."""
    if pattern.get("shape") == "block":
        return hidden_blocks(num_images, image_shape, pattern["size"], generator)
    if pattern.get("shape") == "scattered":
        return scattered_mask(num_images, image_shape[0] * image_shape[1], pattern["count"], generator)
    raise ValueError(f"pattern must have shape 'block' (with size) or 'scattered' (with count), got {pattern}")


@torch.no_grad()
def mean_field_fill(model: RBM, data: torch.Tensor, mask: torch.Tensor, start: torch.Tensor, *, iterations: int = 50) -> torch.Tensor:
    """The principles study's fill-in: ``v_miss ← σ(W σ(vᵀW + c) + b)_miss`` repeated ``iterations`` times with the
    observed pixels of ``data [N, V]`` clamped, from ``start [V]`` (the training set's pixel means) → ``[N, V]``."""
    data = data.to(model.dtype)
    v = torch.where(mask, start.to(model.dtype), data)
    for _ in range(iterations):
        v = torch.where(mask, model.reconstruct(v), data)
    return v


@torch.no_grad()
def posterior_mean_fill(model: RBM, data: torch.Tensor, mask: torch.Tensor, *, rows_per_batch: int = 500) -> torch.Tensor:
    """The exact posterior mean of the missing pixels, ``E[v_miss | v_obs] = Σ_c c · p(c | v_obs)`` with
    ``p(c | v_obs) ∝ exp(−F(v_obs, c))`` over the ``2^k`` completions ``c`` (every row of ``mask [N, V]`` hides the same
    number ``k ≤ 12`` of pixels); observed pixels of ``data [N, V]`` are returned as they are. For ``k = 1`` this is
    ``p(v_i = 1 | v_−i)``, the conditional pseudolikelihood maximises (*Deep Learning* eq. 18.18)."""
    counts = mask.sum(1)
    k = int(counts[0])
    if not bool((counts == k).all()) or not 1 <= k <= MAX_EXACT_MISSING:
        raise ValueError(f"mask must hide the same number (1 to {MAX_EXACT_MISSING}) of pixels in every row, got counts {counts.unique().tolist()}")
    data = data.to(model.dtype)
    completions = torch.tensor(list(itertools.product((0.0, 1.0), repeat=k)), dtype=model.dtype)  # [2^k, k]
    columns = mask.nonzero()[:, 1].reshape(-1, k)  # [N, k], each row's missing pixels in order
    filled = data.clone()
    for start in range(0, data.shape[0], rows_per_batch):
        rows, cols = data[start:start + rows_per_batch], columns[start:start + rows_per_batch]
        states = rows[:, None, :].repeat(1, len(completions), 1)  # [B, 2^k, V]
        states.scatter_(2, cols[:, None, :].expand(-1, len(completions), -1), completions[None].expand(len(rows), -1, -1))
        weights = torch.softmax(-model.free_energy(states.reshape(-1, data.shape[1])).reshape(len(rows), -1), dim=1)
        filled[start:start + rows_per_batch].scatter_(1, cols, weights @ completions)
    return filled


def fill_error(filled: torch.Tensor, data: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean squared difference between ``filled [N, V]`` and the true pixels ``data [N, V]`` over the hidden ones."""
    return float((filled - data.to(filled.dtype))[mask].pow(2).mean())


def classifier_accuracy(train: torch.Tensor, train_labels: torch.Tensor, test: torch.Tensor, test_labels: torch.Tensor, *,
                        kind: str, Cs: Sequence[float], generator: torch.Generator, validation: float = 0.2) -> dict[str, Any]:
    """Test accuracy of a classifier on features ``train [N, F]`` / ``test [M, F]`` whose ``C`` is the best of ``Cs`` by
    accuracy on a random ``validation`` fraction of the training rows (fitted on the rest), refitted on all training
    rows; returns ``{"accuracy", "C", "validation": {C: accuracy}}``. ``kind``: one of :data:`CLASSIFIERS`."""
    from sklearn.linear_model import LogisticRegression  # imported here: scikit-learn is slow to import
    from sklearn.svm import SVC, LinearSVC

    makers = {"logistic": lambda C: LogisticRegression(C=C, max_iter=2000),
              "linear_svm": lambda C: LinearSVC(C=C, max_iter=5000),
              "rbf_svm": lambda C: SVC(C=C, kernel="rbf", gamma="scale")}
    if kind not in makers:
        raise ValueError(f"kind must be one of {CLASSIFIERS}, got {kind!r}")
    if not Cs:
        raise ValueError("Cs must list at least one regularisation constant, got none")
    order = torch.randperm(train.shape[0], generator=generator)
    cut = max(1, round(validation * len(order)))
    held, kept = order[:cut].numpy(), order[cut:].numpy()
    x, y = train.numpy(), train_labels.numpy()
    scores = {float(C): float(makers[kind](C).fit(x[kept], y[kept]).score(x[held], y[held])) for C in Cs}
    best = max(scores, key=scores.get)
    accuracy = float(makers[kind](best).fit(x, y).score(test.numpy(), test_labels.numpy()))
    return {"accuracy": accuracy, "C": best, "validation": scores}


def sml_margin(accuracies: dict[str, float], sml: str = "PCD (SML)") -> dict[str, Any]:
    """The SML margin of one setting: ``accuracies[sml]`` minus the best other principle's accuracy, and that principle."""
    others = {name: value for name, value in accuracies.items() if name != sml}
    if sml not in accuracies or not others:
        raise ValueError(f"accuracies must hold {sml!r} and at least one other principle, got {sorted(accuracies)}")
    rival = max(others, key=others.get)
    return {"margin": accuracies[sml] - others[rival], "best_other": rival}


VARIANTS = {
    "base": "the principles study's setting, retrained here",
    "lr_by_accuracy": "learning rate chosen by validation accuracy instead of validation log-likelihood",
    "hidden": "{hidden_wide} hidden units instead of {hidden} (learning rate as chosen at {hidden})",
    "epochs": "{epochs_factor}× the training budget ({epochs} → {epochs_total} epochs, same learning rate)",
    "seed1": "training seed 1 instead of 0 (initial weights, minibatch order and chains)",
    "seed2": "training seed 2 instead of 0",
}
"""The training variants :mod:`scripts.ablate_principles` measures, each one setting away from ``base``."""
CLASSIFIER_CS = (0.01, 0.1, 1.0, 10.0, 100.0)
SVM_CS = (0.1, 1.0, 10.0)  # an RBF SVM on tens of thousands of rows is slow to fit at large C
EXACT_LOG_LIKELIHOOD_HIDDEN = 25  # log Z enumerates 2^H hidden states


def fill_patterns(block: int, *, exact_up_to: int) -> list[dict[str, Any]]:
    """The missing-value settings measured on every model: the study's ``block × block`` square filled by mean field,
    then ``block²``, ``block``, 3 and 1 pixels scattered at random (mean field), each also filled exactly where at most
    ``exact_up_to`` pixels are missing (:func:`posterior_mean_fill`). Each entry: ``{"name", "pattern", "rule"}``."""
    patterns = [{"shape": "block", "size": block}] + [{"shape": "scattered", "count": k}
                                                      for k in sorted({block * block, block, 3, 1}, reverse=True)]
    entries = []
    for pattern in patterns:
        count = pattern["size"] ** 2 if pattern["shape"] == "block" else pattern["count"]
        label = f"{pattern['size']}×{pattern['size']} block" if pattern["shape"] == "block" else f"{count} scattered"
        for rule in ("mean_field", "exact") if count <= exact_up_to else ("mean_field",):
            entries.append({"name": f"{label}, {rule.replace('_', '-')}", "pattern": pattern, "rule": rule})
    return entries


def measure_model(model: RBM, data, patterns: Sequence[dict[str, Any]], *, seed: int, classifiers: bool = False,
                  log_likelihood: bool = True) -> dict[str, Any]:
    """A trained RBM's numbers: exact test log-likelihood (None above 25 hidden units or without ``log_likelihood``), the study's classification
    accuracy (logistic regression, ``C = 1``), the fill-in error of every pattern (the same masks for every model:
    each pattern's draws restart from ``seed``), and with ``classifiers`` every classifier of :data:`CLASSIFIERS` with
    ``C`` chosen on validation."""
    start = data.train.mean(0)
    fills = {}
    for entry in patterns:
        mask = missing_mask(data.test.shape[0], data.image_shape, entry["pattern"], torch.Generator().manual_seed(seed))
        filled = (mean_field_fill(model, data.test, mask, start) if entry["rule"] == "mean_field"
                  else posterior_mean_fill(model, data.test, mask))
        fills[entry["name"]] = fill_error(filled, data.test, mask)
    exact = log_likelihood and model.num_hidden <= EXACT_LOG_LIKELIHOOD_HIDDEN
    record = {"log_likelihood": exact_log_likelihood(model, data.test) if exact else None,
              "accuracy": classification_accuracy(model, data), "fill": fills}
    if classifiers:
        train, test = hidden_features(model, data.train), hidden_features(model, data.test)
        record["classifiers"] = {kind: classifier_accuracy(train, data.train_labels, test, data.test_labels, kind=kind,
                                                           Cs=CLASSIFIER_CS if kind == "logistic" else SVM_CS,
                                                           generator=torch.Generator().manual_seed(seed))
                                 for kind in CLASSIFIERS}
    return record


SML = "PCD (SML)"
PL = "pseudolikelihood"
CAUSE_SECTION = "Cause"
"""The hand-written conclusion that a re-render keeps (:func:`pfzoo.studies.reporting.with_kept_section`)."""


def _variant_label(payload: dict[str, Any], variant: str) -> str:
    total = payload["epochs"] * payload["epochs_factor"]
    return VARIANTS[variant].format(epochs_total=total, **payload)


def _rows(payload: dict[str, Any], published: dict[str, Any] | None) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    """(label, {principle: record}) per setting: the published study's row where its training set differs, then every
    training variant; records hold ``log_likelihood``, ``accuracy`` and ``fill``."""
    rows = []
    names = list(payload["variants"]["base"])
    if published is not None and payload["train"][0] != published["train"][0]:
        records = {r["name"]: {"log_likelihood": r["test_log_likelihood"], "accuracy": r["classification_accuracy"],
                               "fill": {}} for r in published["results"] if r["name"] in names}
        rows.append((f"the study as published ({published['train'][0]} training rows; `reports/principles/results.json`)", records))
    label = "base: the study's setting" + (f" on a random {payload['train'][0]} training rows" if published is not None
                                           and payload["train"][0] != published["train"][0] else "") + ", retrained here"
    rows.append((label, payload["variants"]["base"]))
    rows += [(_variant_label(payload, v), payload["variants"][v]) for v in VARIANTS if v != "base" and payload["variants"].get(v)]
    return rows


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)] + ["| " + " | ".join(r) + " |" for r in rows]


def _rank(values: dict[str, float], name: str, *, high: bool) -> int:
    return 1 + sum((value > values[name]) if high else (value < values[name]) for value in values.values())


def claim_tables(payload: dict[str, Any], published: dict[str, Any] | None) -> list[str]:
    """The three markdown tables of one data set: SML's classification margin, pseudolikelihood's log-likelihood and
    its fill-in error against SML's, per setting."""
    names = list(payload["variants"]["base"])
    rows = _rows(payload, published)
    base = payload["variants"]["base"]
    lines = [f"### {payload['dataset']}: {payload['train'][0]} training and {payload['test'][0]} test rows", "",
             "**§18.2 classification** (test accuracy of the classifier on p(h = 1 | v); SML margin = PCD minus the best "
             "other; > 0 is the claim)", ""]
    accuracy_rows = [(label, {n: r["accuracy"] for n, r in records.items()}) for label, records in rows]
    after_base = 1 + next(i for i, (_, records) in enumerate(rows) if records is base)
    accuracy_rows[after_base:after_base] = [(f"classifier: {kind.replace('_', ' ')}, C chosen on validation (base models)",
                           {n: base[n]["classifiers"][kind]["accuracy"] for n in names}) for kind in CLASSIFIERS]
    base_margin = sml_margin({n: base[n]["accuracy"] for n in names})["margin"]
    table = []
    for label, accuracies in accuracy_rows:
        margin = sml_margin(accuracies)
        table.append([label, *(f"{accuracies[n]:.4f}" for n in names), f"{margin['margin']:+.4f}", margin["best_other"],
                      f"{margin['margin'] - base_margin:+.4f}"])
    lines += _table(["setting (one change from base)", *names, "SML margin", "best other", "moved"], table)
    seeded = ["base"] + [v for v in VARIANTS if v.startswith("seed") and payload["variants"].get(v)]
    seeds = [sml_margin({n: payload["variants"][v][n]["accuracy"] for n in names})["margin"] for v in seeded]
    mean = sum(seeds) / len(seeds)
    spread = (sum((s - mean) ** 2 for s in seeds) / max(1, len(seeds) - 1)) ** 0.5
    noise = (f"SML margin over {len(seeds)} training seeds: mean {mean:+.4f}, standard deviation {spread:.4f}. " if len(seeds) > 1
             else "One training seed only (no seed-to-seed spread measured). ")
    lines += ["", noise +
              "C chosen: " + "; ".join(f"{kind.replace('_', ' ')} " + ", ".join(f"{n} {base[n]['classifiers'][kind]['C']:g}" for n in names)
                                       for kind in CLASSIFIERS) + ".", ""]
    lines += ["**§18.3 density estimation** (exact test log-likelihood, nats; PL − SML < 0 is the claim)", ""]
    table = []
    for label, records in rows:
        values = {n: r["log_likelihood"] for n, r in records.items()}
        if any(v is None for v in values.values()):
            continue
        table.append([label, *(f"{values[n]:.2f}" for n in names), f"{values[PL] - values[SML]:+.2f}",
                      f"{_rank(values, PL, high=True)} of {len(values)}"])
    lines += _table(["setting", *names, "PL − SML", "PL's rank"], table)
    lines += ["", "**§18.3 missing values** (mean squared error of the filled-in pixels, base models; PL − SML < 0 is the claim)", ""]
    table = []
    for pattern in base[names[0]]["fill"]:
        values = {n: base[n]["fill"][pattern] for n in names}
        table.append([pattern, *(f"{values[n]:.4f}" for n in names), f"{values[PL] - values[SML]:+.4f}",
                      f"{_rank(values, PL, high=False)} of {len(values)}"])
    lines += _table(["missing pixels, fill rule", *names, "PL − SML", "PL's rank"], table)
    patterns = list(base[names[0]]["fill"])
    lines += ["", "PL − SML fill-in error under the training variants (the study's pattern first, the smallest amount last):", ""]
    table = [[label, *(f"{records[PL]['fill'][p] - records[SML]['fill'][p]:+.4f}" for p in patterns)]
             for label, records in rows if records[PL]["fill"]]
    lines += _table(["setting", *patterns], table) + [""]
    ml = payload.get("maximum_likelihood")
    if ml:
        lines += [f"**Exact maximum likelihood**: L-BFGS on the exact gradient (all 2^{payload['hidden']} hidden states "
                  f"enumerated), started from the base {PL} RBM, {ml['evaluations']} evaluations (training log-likelihood "
                  f"{ml['train_log_likelihood'][0]:.3f} → {max(ml['train_log_likelihood']):.3f} nats), beside the base models:", ""]
        models = {PL: base[PL], SML: base[SML], "exact ML (from PL)": ml}
        header = ["model", "test log-likelihood", "accuracy", *patterns]
        lines += _table(header, [[name, f"{r['log_likelihood']:.2f}", f"{r['accuracy']:.4f}", *(f"{r['fill'][p]:.4f}" for p in patterns)]
                                 for name, r in models.items()]) + [""]
    return lines


def readme(payloads: Sequence[dict[str, Any]], published: dict[str, Any]) -> str:
    """The ablation's report: per data set the three claim tables (:func:`claim_tables`), the learning-rate search and
    the machine; ``published`` is ``reports/principles/results.json``, whose rows are the ones the claims failed on."""
    lines = ["# Two §18 claims the principles study misses: an ablation (issue 52)", "",
             "*Deep Learning* §18.2 (seed 002): Marlin et al. (2010) \"found that SML results in the best test set "
             "log-likelihood for an RBM, and that if the RBM's hidden units are used as features for an SVM classifier, SML "
             "results in the best classification accuracy.\" §18.3: \"Pseudolikelihood tends to perform poorly on tasks that "
             "require a good model of the full joint p(x), such as density estimation and sampling. It can perform better "
             "than maximum likelihood for tasks that require only the conditional distributions used during training, such "
             "as filling in small amounts of missing values.\" The seed gives no number and none of Marlin et al.'s "
             "settings (hidden units, classifier settings, amount of missing values, training budget).", "",
             "Each row below changes one setting of `reports/principles` (RBMs with 20 hidden units, SGD with momentum 0.5 "
             "on minibatches of 100, the learning rate of {0.01, 0.03, 0.1, 0.3} with the best exact log-likelihood on a "
             "validation fifth, logistic regression with C = 1 on p(h = 1 | v), a block of pixels filled by 50 mean-field "
             "iterations) and reports how far it moves the number the claim is about. \"exact\" fill: the posterior mean "
             "E[v_miss | v_obs] over all completions, which for one pixel is the conditional pseudolikelihood fits. Code: "
             "`pfzoo/studies/principles_ablation.py`; command: `scripts/ablate_principles.py`; numbers: `results_<data>.json`.", "",
             "## Measurements", ""]
    for payload in payloads:
        match = next((part for part in published["datasets"] if part["dataset"] == payload["dataset"]), None)
        lines += claim_tables(payload, match)
        lines += ["<details><summary>Learning-rate search (validation log-likelihood / validation accuracy)</summary>", ""]
        lines += [f"- {name}: " + ", ".join(f"{p['lr']:g}: {p['validation_log_likelihood']:.2f} / {p['validation_accuracy']:.4f}"
                                           for p in points) for name, points in payload["search"].items()]
        lines += ["", "</details>", "",
                  f"Measured ({payload['dataset']}) {payload['date']} on {payload['machine']}, {payload['threads']} thread(s), "
                  f"load average at the end {payload['load_average']}; {payload['seconds'] / 60:.1f} minutes.", ""]
    return "\n".join(lines)


def log_likelihood_and_gradient(model: RBM, data: torch.Tensor, *, chunk: int = 1 << 14,
                                dtype: torch.dtype = torch.float64) -> tuple[float, dict[str, torch.Tensor]]:
    """Exact ``L(θ) = mean_n log p(v_n)`` of ``data [N, V]`` and its gradient, by enumerating the ``2^H`` hidden states.

    ``∇L = E_data[∂(−E)/∂θ] − E_model[∂(−E)/∂θ]`` with ``−∂E/∂W = v hᵀ``: the data term uses ``p(h = 1 | v) = σ(vW + c)``,
    the model term ``p(h) ∝ exp(c·h + Σ_i softplus((Wh + b)_i))`` and ``p(v = 1 | h) = σ(Wh + b)`` over every ``h``.
    Returns ``(L, {"weight" [V, H], "visible_bias" [V], "hidden_bias" [H]})``, computed in ``dtype`` (float32 halves
    the enumeration's time; its ``L`` is then good to about 1e-5 nats per row)."""
    with torch.no_grad():
        W, b, c = model.weight.to(dtype), model.visible_bias.to(dtype), model.hidden_bias.to(dtype)
        v = data.to(dtype)
        H = W.shape[1]
        log_z = torch.tensor(-torch.inf, dtype=dtype)
        weighted = {"weight": torch.zeros_like(W), "visible_bias": torch.zeros_like(b), "hidden_bias": torch.zeros_like(c)}
        bits = 1 << torch.arange(H)
        for start in range(0, 1 << H, chunk):  # a running logsumexp: each chunk rescaled to the largest term so far
            h = ((torch.arange(start, min(start + chunk, 1 << H))[:, None] & bits) > 0).to(dtype)
            logits = h @ W.T + b
            log_weight = h @ c + torch.nn.functional.softplus(logits).sum(1)
            new_log_z = torch.logaddexp(log_z, torch.logsumexp(log_weight, 0))
            scale, p = torch.exp(log_z - new_log_z), torch.exp(log_weight - new_log_z)
            visible = torch.sigmoid(logits) * p[:, None]
            weighted = {"weight": weighted["weight"] * scale + visible.T @ h, "visible_bias": weighted["visible_bias"] * scale + visible.sum(0),
                        "hidden_bias": weighted["hidden_bias"] * scale + p @ h}
            log_z = new_log_z
        hidden = torch.sigmoid(v @ W + c)
        log_lik = float((v @ b + torch.nn.functional.softplus(v @ W + c).sum(1)).mean() - log_z)
        gradient = {"weight": v.T @ hidden / len(v) - weighted["weight"], "visible_bias": v.mean(0) - weighted["visible_bias"],
                    "hidden_bias": hidden.mean(0) - weighted["hidden_bias"]}
    return log_lik, gradient


def fit_maximum_likelihood(model: RBM, data: torch.Tensor, *, iterations: int = 100, dtype: torch.dtype = torch.float64) -> list[float]:
    """Maximise the exact training log-likelihood of ``data [N, V]`` in place, full batch, by L-BFGS (strong Wolfe,
    at most ``iterations`` iterations) on :func:`log_likelihood_and_gradient`: the maximum-likelihood estimator that
    SML approximates, for ``H`` small enough to enumerate. Returns the training log-likelihood at each evaluation."""
    parameters = {"weight": model.weight, "visible_bias": model.visible_bias, "hidden_bias": model.hidden_bias}
    trace = []

    def closure() -> torch.Tensor:
        value, gradient = log_likelihood_and_gradient(model, data, dtype=dtype)
        for name, parameter in parameters.items():
            parameter.grad = -gradient[name].to(parameter.dtype)
        trace.append(value)
        return torch.tensor(-value, dtype=torch.float64)  # LBFGS compares losses as Python numbers

    optimizer = torch.optim.LBFGS(list(parameters.values()), lr=1.0, max_iter=iterations, history_size=20,
                                  line_search_fn="strong_wolfe", tolerance_grad=1e-9, tolerance_change=1e-12)
    optimizer.step(closure)
    return trace


def summary(payloads: Sequence[dict[str, Any]], published: dict[str, Any]) -> dict[str, Any]:
    """The numbers the claims are judged by, per data set and setting, for citing (``summary.json``): the SML margin
    (and its mean and standard deviation over training seeds), pseudolikelihood minus SML in test log-likelihood and in
    every fill-in error, and exact maximum likelihood minus pseudolikelihood where it was run."""
    out = {}
    for payload in payloads:
        names = list(payload["variants"]["base"])
        part = next((p for p in published["datasets"] if p["dataset"] == payload["dataset"]), None)
        settings = {key: payload["variants"][key] for key in VARIANTS if payload["variants"].get(key)}
        if part is not None and part["train"][0] != payload["train"][0]:
            settings = {"published": {r["name"]: {"accuracy": r["classification_accuracy"], "log_likelihood": r["test_log_likelihood"],
                                                  "fill": {}} for r in part["results"] if r["name"] in names}, **settings}
        base = payload["variants"]["base"]
        accuracies = {key: {n: r["accuracy"] for n, r in records.items()} for key, records in settings.items()}
        accuracies.update({f"classifier_{kind}": {n: base[n]["classifiers"][kind]["accuracy"] for n in names} for kind in CLASSIFIERS})
        seeded = [sml_margin(accuracies[key])["margin"] for key in settings if key == "base" or key.startswith("seed")]
        mean = sum(seeded) / len(seeded)
        record = {"sml_margin": {key: sml_margin(values) for key, values in accuracies.items()},
                  "sml_margin_seeds": {"count": len(seeded), "mean": mean,
                                       "std": (sum((m - mean) ** 2 for m in seeded) / max(1, len(seeded) - 1)) ** 0.5},
                  "log_likelihood_pl_minus_sml": {key: records[PL]["log_likelihood"] - records[SML]["log_likelihood"]
                                                  for key, records in settings.items() if records[PL]["log_likelihood"] is not None},
                  "fill_pl_minus_sml": {key: {p: records[PL]["fill"][p] - records[SML]["fill"][p] for p in records[PL]["fill"]}
                                        for key, records in settings.items() if records[PL]["fill"]}}
        ml = payload.get("maximum_likelihood")
        if ml:
            record["maximum_likelihood_minus_pl"] = {"log_likelihood": ml["log_likelihood"] - base[PL]["log_likelihood"],
                                                     "fill": {p: ml["fill"][p] - base[PL]["fill"][p] for p in ml["fill"]}}
        out[payload["dataset"]] = record
    return out


def write_report(folder: Path, published: dict[str, Any]) -> None:
    """``folder/README.md`` (:func:`readme`, keeping its hand-written ``## Cause`` section) and ``folder/summary.json``
    (:func:`summary`) from ``folder/results_*.json``."""
    payloads = [json.loads(path.read_text()) for path in sorted(Path(folder).glob("results_*.json"))]
    target = Path(folder) / "README.md"
    previous = target.read_text() if target.is_file() else ""
    target.write_text(with_kept_section(readme(payloads, published), previous, CAUSE_SECTION))
    (Path(folder) / "summary.json").write_text(json.dumps(summary(payloads, published), indent=1))
