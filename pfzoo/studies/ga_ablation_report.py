"""The markdown of ``reports/paths/ga_ablation.md``, rendered from ga_ablation.json's content alone (what
``scripts/ablate_ga.py`` measures with :mod:`pfzoo.studies.ga_ablation`)."""

from __future__ import annotations

import math

from pfzoo.studies.ga_ablation import BASES, SEED_CLAIMS, VARIANTS, cause, shortfalls

_BASE_NAMES = {"uniform": "uniform", "base_rate": "base rates"}


def _cell(row: dict | None) -> str:
    return "—" if row is None else f"{row['log_z']:.2f} ± {row['stderr']:.2f} (ESS {row['ess']:.0f})"


def _rows(stage: dict) -> dict[tuple[str, str, int], dict]:
    return {(r["path"], r["base"], r["steps"]): r for r in stage["rows"]}


def _stage_entries(results: dict, stage: str) -> dict[str, dict]:
    return {name: entry[stage] for name, entry in results["variants"].items() if stage in entry}


def _measured(results: dict) -> dict[str, dict]:
    """Per variant with a full or a mas stage: their rows together (``rows``), the K values (``steps``) and the
    shortfalls over all of them (:func:`~pfzoo.studies.ga_ablation.shortfalls`)."""
    out = {}
    for name, entry in results["variants"].items():
        rows = [r for stage in ("full", "mas") if stage in entry for r in entry[stage]["rows"]]
        if rows:
            out[name] = {"rows": rows, "steps": sorted({r["steps"] for r in rows}), "shortfalls": shortfalls(rows)}
    return out


def _closing(entry: dict) -> str:
    closing = (entry.get("training") or {}).get("closing_test_log_likelihood")
    return "—" if not closing else f"{closing['mean']:.2f}"


def screen_table(results: dict) -> list[str]:
    """GA from each base at the screen's K, per variant, and uniform − base rates."""
    entries = _stage_entries(results, "screen")
    if not entries:
        return []
    k = max(next(iter(entries.values()))["settings"]["steps"])
    chains = next(iter(entries.values()))["settings"]["chains"]
    lines = ["## Screen: the geometric path from each base, K = " + f"{k:,}", "",
             f"AIS along GA, linear schedule, {chains} chains, seed 0; log Ẑ ± stderr (ESS). Each variant changes one training "
             "setting of the centre (the zoo's CD1(500) recipe: lr 0.05, momentum 0.9, weight decay 2·10⁻⁴, batch 100, CD-1, "
             "weights N(0, 0.01²), visible biases at the base-rate logits, binarized MNIST's 50,000 training digits; stopped "
             "after 5 epochs). Test log-likelihood: the training run's closing estimate (AIS from the base rates, K = 1,000, "
             "200 test digits). A uniform − base-rate difference far below 0 means the chains from uniform miss mass. The last three "
             "columns: the mean visible bias over the pixels never on in the training digits, the mean weight of those pixels, the mean "
             "hidden bias (with the base-rate logits the never-on pixels start at about −10.8).", "",
             "| variant | setting changed | test log-lik. (closing) | GA, uniform | GA, base rates | uniform − base rates | "
             "visible bias, never-on pixels | mean W, never-on pixels | hidden bias |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, stage in entries.items():
        rows = _rows(stage)
        uniform, rates = rows.get(("GA", "uniform", k)), rows.get(("GA", "base_rate", k))
        diff = "—" if uniform is None or rates is None else (
            f"{uniform['log_z'] - rates['log_z']:+.2f} ± {(uniform['stderr'] ** 2 + rates['stderr'] ** 2) ** 0.5:.2f}")
        p = results["variants"][name].get("parameters")
        params = "— | — | —" if p is None else f"{p['visible_bias_never_on']:.2f} | {p['weight_never_on']:+.3f} | {p['hidden_bias']:+.2f}"
        lines.append(f"| {name} | {results['variants'][name]['changed']} | {_closing(results['variants'][name])} | {_cell(uniform)} | "
                     f"{_cell(rates)} | {diff} | {params} |")
    return lines + [""]


def full_table(results: dict) -> list[str]:
    """GA and MAS from both bases at every K of the full and mas stages, the shortfalls from the largest log Ẑ, and RAISE."""
    entries = _measured(results)
    if not entries:
        return []
    lines = ["## Geometric path against the moment-averaged spline, both bases", "",
             "Same chains for every path and base (100, seed 0), linear schedule; log Ẑ ± stderr (ESS). MAS: 5 evenly spaced knots "
             "fitted by 300 PCD iterations of 1,000 chains to target moments from 1,000 Gibbs chains started at training digits "
             "(1,000 burn-in, 100 averaged sweeps), GA between knots. Shortfall: the run's log Ẑ below the largest measured on the "
             "model (every log Ẑ is a stochastic lower bound on the same log Z, so the largest is the least biased).", "",
             "| variant | K | GA, uniform | MAS, uniform | GA, base rates | MAS, base rates | GA uniform shortfall | MAS uniform shortfall |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, stage in entries.items():
        rows, falls = _rows(stage), stage["shortfalls"]["runs"]
        for k in stage["steps"]:
            cells = [_cell(rows.get((p, b, k))) for b in BASES for p in ("GA", "MAS")]
            short = [(f"{falls[key]['shortfall']:.2f} ± {falls[key]['stderr']:.2f}" if (key := f"{p} uniform {k}") in falls else "—")
                     for p in ("GA", "MAS")]
            lines.append(f"| {name} | {k:,} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} | {short[0]} | {short[1]} |")
    raised = {name: entry["raise"] for name, entry in results["variants"].items() if "raise" in entry and name in entries}
    if raised:
        lines += ["", "### RAISE: which log Ẑ the test digits support", "",
                  "RAISE from the base rates (reverse chains per digit, control variates for the mean over all 10,000 test digits) is "
                  "a stochastic lower bound on the annealing model's test log-likelihood; each AIS run implies "
                  "mean log f(v_test) − log Ẑ. An implied value far above RAISE comes from a log Ẑ that falls short.", "",
                  "| variant | RAISE, base rates | implied by GA, uniform | by MAS, uniform | by GA, base rates | by MAS, base rates |",
                  "|---|---:|---:|---:|---:|---:|"]
        for name, check in raised.items():
            r, cells = check["raise_base_rate"], []
            for b in BASES:
                for p in ("GA", "MAS"):  # the run at the largest K of each path and base, from the stored log-f mean
                    run = max((x for x in entries[name]["rows"] if x["path"] == p and x["base"] == b), key=lambda x: x["steps"], default=None)
                    cells.append("—" if run is None else f"{check['mean_log_f_test'] - run['log_z']:.2f} (K = {run['steps']:,})")
            lines.append(f"| {name} | {r['mean']:.2f} ± {r['stderr']:.2f} (K = {r['steps']:,}, {r['chains']} chains × {r['digits']} digits) | "
                         + " | ".join(cells) + " |")
    return lines + [""]


def verdict(results: dict) -> list[str]:
    """The cause named from the screen's moves (:func:`~pfzoo.studies.ga_ablation.cause`, every variant at one K), then
    the cause's full stage (GA and MAS at the largest K), RAISE, and its parameters against those of the variant it
    changes."""
    entries = {name: {"shortfalls": s["shortfalls"]} for name, s in _stage_entries(results, "screen").items()}
    if "centre" not in entries or len(entries) < 2:
        return []
    variants = results["variants"]
    found = cause(entries, relative_to={name: variants[name].get("relative_to", "centre") for name in entries})
    measured = _measured(results)
    c = found["centre"]
    lines = ["## The cause", "",
             f"Screen (K = {c['steps']:,}): GA from uniform falls {c['shortfall']:.2f} ± {c['stderr']:.2f} nats short of the largest log Ẑ on the "
             "centre. Each variant's shortfall, and its move from the variant it changes one setting of:", ""]
    lines += [f"- {name} ({variants[name]['changed']}): {m['shortfall']:.2f} ± {m['stderr']:.2f} "
              f"(move {m['move']:+.2f} from {m['relative_to']}{', significant' if m['significant'] else ''})" for name, m in found["moves"].items()]
    named = found["cause"]
    if named is None:
        return lines + ["", "No single training setting of this ablation opens a GA shortfall from the uniform base beyond 1 nat and 3 combined stderrs.", ""]
    lines += ["", f"Measured cause: **{named}** ({variants[named]['changed']}), the largest significant move "
                  f"(+{found['moves'][named]['move']:.1f} nats at K = {found['moves'][named]['steps']:,}; the slides: about {SEED_CLAIMS['slides_ga_shortfall']:.0f})."]
    for name in (n for n in variants if n == named or variants[n].get("relative_to") == named or (found["moves"].get(n, {}).get("significant"))):
        full = measured.get(name)
        if full is None:
            continue
        falls, ref = full["shortfalls"]["runs"], full["shortfalls"]["reference"]
        parts = [f"{p} from {_BASE_NAMES[b]} at K = {k:,}: {falls[key]['shortfall']:.2f} ± {falls[key]['stderr']:.2f}"
                 for k in full["steps"] for p in ("GA", "MAS") for b in BASES if (key := f"{p} {b} {k}") in falls]
        lines += ["", f"{name}: shortfalls from the largest log Ẑ ({ref['path']} from {_BASE_NAMES[ref['base']]}, "
                      f"K = {ref['steps']:,}: {ref['log_z']:.2f} ± {ref['stderr']:.2f}): " + "; ".join(parts) + "."]
    if named in measured:
        ga = sorted((r for r in measured[named]["rows"] if r["path"] == "GA" and r["base"] == "uniform"), key=lambda r: r["steps"])
        rates = max((r for r in measured[named]["rows"] if r["path"] == "GA" and r["base"] == "base_rate"), key=lambda r: r["steps"], default=None)
        if len(ga) > 1 and rates is not None:
            runs = "; ".join(f"K = {r['steps']:,}: {r['log_z']:.2f} (ESS {r['ess']:.0f})" for r in ga)
            lines += ["", f"On {named}, GA from uniform levels off ({runs}) "
                          f"while GA from the base rates reaches {rates['log_z']:.2f} ± {rates['stderr']:.2f} (ESS {rates['ess']:.0f}) at "
                          f"K = {rates['steps']:,}, {rates['log_z'] - ga[-1]['log_z']:.2f} nats higher: the chains from uniform agree with one "
                          "another and miss mass that the base-rate chains reach, the failure RAISE §5.1 warns about (AIS estimates from a "
                          "uniform start \"may appear to level off\"). Both are stochastic lower bounds on the same log Z, so the uniform run is "
                          "the one that falls short."]
    p, q = variants[named].get("parameters"), variants.get(variants[named].get("relative_to", "centre"), {}).get("parameters")
    if p and q:
        lines += ["", f"Where the parameters differ: the {p['never_on_pixels']} pixels never on in the training digits end with mean visible bias "
                      f"{p['visible_bias_never_on']:.2f} (against {q['visible_bias_never_on']:.2f}) and mean weight {p['weight_never_on']:+.3f} "
                      f"(against {q['weight_never_on']:+.3f}); mean hidden bias {p['hidden_bias']:+.2f} (against {q['hidden_bias']:+.2f})."]
    return lines + [""]


FULL_LENGTH = "60 epochs, visible biases 0"
"""The variant that carries the cause (visible biases from 0) to the zoo's full 60 epochs."""


def _largest_k(rows: list[dict], path: str, base: str) -> dict | None:
    return max((r for r in rows if r["path"] == path and r["base"] == base), key=lambda r: r["steps"], default=None)


def full_length(results: dict) -> list[str]:
    """What the cause does at the zoo's full training length: the :data:`FULL_LENGTH` variant's GA shortfall from the
    uniform base at every K (does it level off or still rise?), beside the 5-epoch variant's, the zoo's own 60-epoch
    RBM's and the seeds' figures, and whether MAS from uniform closes it (within 1 nat or 3 combined stderrs of the
    largest log Ẑ)."""
    variants, measured = results["variants"], _measured(results)
    if FULL_LENGTH not in measured:
        return []
    entry, full = variants[FULL_LENGTH], measured[FULL_LENGTH]
    falls, ref = full["shortfalls"]["runs"], full["shortfalls"]["reference"]
    ga = sorted((r for r in full["rows"] if r["path"] == "GA" and r["base"] == "uniform"), key=lambda r: r["steps"])
    mas = _largest_k(full["rows"], "MAS", "uniform")
    if not ga:
        return []
    short = falls[f"GA uniform {ga[-1]['steps']}"]
    s, gap = SEED_CLAIMS, SEED_CLAIMS["raise_ais_uniform"] - SEED_CLAIMS["raise_ais_base_rate"]
    closing = (entry.get("training") or {}).get("closing_test_log_likelihood")
    lines = [f"## At the zoo's full length: {FULL_LENGTH}", "",
             f"The cause carried to the zoo's whole recipe: {entry['changed']}. Every other setting is the zoo's CD1(500)'s "
             "(60 epochs, lr 0.05, momentum 0.9, weight decay 2·10⁻⁴, CD-1)"
             + (f"; closing test log-likelihood {closing['mean']:.2f} ± {closing['stderr']:.2f} (AIS from the base rates, K = 1,000, "
                f"{closing['num_test']} test digits; RAISE Table 1's mnistCD1-500 by AIS from the base rates: {s['raise_ais_base_rate']})"
                if closing else "") + ". Its rows are in the tables above.", ""]
    others, found = [], {}
    for name in ("visible biases 0", "60 epochs"):
        other = measured.get(name) or ({"shortfalls": variants[name]["screen"]["shortfalls"]} if "screen" in variants.get(name, {}) else None)
        if other is not None:
            k, value = max(((int(key.split()[-1]), v) for key, v in other["shortfalls"]["runs"].items() if key.startswith("GA uniform ")),
                           key=lambda item: item[0])
            found[name] = value["shortfall"]
            others.append(f"{value['shortfall']:.2f} ± {value['stderr']:.2f} on {name} (K = {k:,})")
    runs = "; ".join(f"K = {r['steps']:,}: {r['log_z']:.2f} ± {r['stderr']:.2f} (ESS {r['ess']:.0f}), "
                     f"{falls['GA uniform ' + str(r['steps'])]['shortfall']:.2f} short" for r in ga)
    # Still rising: the last K's log Ẑ above the one before by more than 3 combined stderrs (AIS's bias shrinks with K).
    rising = len(ga) > 1 and ga[-1]["log_z"] - ga[-2]["log_z"] > 3 * (ga[-1]["stderr"] ** 2 + ga[-2]["stderr"] ** 2) ** 0.5
    lines.append(f"GA from uniform ({runs}) against the largest log Ẑ on this RBM ({ref['path']} from {_BASE_NAMES[ref['base']]}, "
                 f"K = {ref['steps']:,}: {ref['log_z']:.2f} ± {ref['stderr']:.2f})"
                 + (f"; at the largest K against {' and '.join(others)}" if others else "") + ". "
                 + ("It still rises with K, so its shortfall depends on K (the slides state none)." if rising else
                    "It levels off with K." if len(ga) > 1 else ""))
    if max(r["ess"] for r in ga) < 2:
        lines[-1] += (" With an ESS near 1 each uniform run is the weight of its one best chain of the 100, so its shortfall "
                      "is that chain's, and would move with the seed.")
    if mas is not None:
        m = falls[f"MAS uniform {mas['steps']}"]
        closed = m["shortfall"] < max(1.0, 3 * m["stderr"])
        lines[-1] += (f" MAS from uniform at K = {mas['steps']:,} reaches {mas['log_z']:.2f} ± {mas['stderr']:.2f} (ESS {mas['ess']:.0f}), "
                      f"{m['shortfall']:.2f} ± {m['stderr']:.2f} short: it {'closes' if closed else 'does not close'} the gap.")
    check = entry.get("raise")
    if check is not None:
        r, rows = check["raise_base_rate"], _rows(full)
        said = "; ".join(f"{p} from {_BASE_NAMES[b]} at K = {k:,}: {check['mean_log_f_test'] - rows[(p, b, k)]['log_z']:.2f}"
                         for b in BASES for p in ("GA", "MAS") for k in full["steps"] if (p, b, k) in rows)
        lines += ["", f"RAISE from the base rates at K = {r['steps']:,} ({r['chains']} chains × {r['digits']} test digits), a stochastic "
                      f"lower bound on the test log-likelihood: {r['mean']:.2f} ± {r['stderr']:.2f}. The test log-likelihood each AIS run "
                      f"implies: {said} (the slides illustrate a 20-nat shortfall as \"a log probability of 130 and 110\")."]
    p, q = entry.get("parameters"), variants.get(entry.get("relative_to", ""), {}).get("parameters")
    if p and q:
        lines += ["", f"Its {p['never_on_pixels']} pixels never on in the training digits end with mean visible bias "
                      f"{p['visible_bias_never_on']:.2f} (the {entry['relative_to']} RBM's: {q['visible_bias_never_on']:.2f}) and mean weight "
                      f"{p['weight_never_on']:+.3f} ({q['weight_never_on']:+.3f}); its bias alone would turn such a pixel on with probability "
                      f"{1 / (1 + math.exp(-p['visible_bias_never_on'])):.2f}."]
    significant = short["shortfall"] > max(1.0, 3 * short["stderr"])
    ratio = short["shortfall"] / s["slides_ga_shortfall"]
    verdict = (f"The slides' figure is about {s['slides_ga_shortfall']:.0f} nats (RAISE Table 1, the same RBMs, at K = 10⁵: {gap:.2f}). "
               + (f"At the zoo's full training length, starting the visible biases at 0 still makes GA from uniform fall short, by "
                  f"{short['shortfall']:.1f} ± {short['stderr']:.1f} nats at K = {ga[-1]['steps']:,}, {ratio:.1f} times the slides' figure"
                  + (": the slides' order of magnitude" if 0.5 <= ratio <= 2 else "")
                  + (f", where the 5-epoch RBM's is {found['visible biases 0'] / s['slides_ga_shortfall']:.1f} times it"
                     if "visible biases 0" in found else "")
                  if significant else "At the zoo's full training length the visible-bias start no longer makes GA from uniform fall short")
               + ". The slides state no initialisation, training length or K, so this is a training that produces a shortfall of "
                 "this size, not a measurement of theirs.")
    return lines + ["", verdict, ""]


def markdown(results: dict) -> str:
    """The whole report from ``results`` (ga_ablation.json's content)."""
    s = SEED_CLAIMS
    gap = s["raise_ais_uniform"] - s["raise_ais_base_rate"]
    lines = ["# Why the slides' geometric path falls short on CD1(500): a training ablation", "",
             "The slides (Grosse, Maddison & Salakhutdinov, \"Estimating Partition Functions of RBMs\") state only: an RBM with 500 "
             "hidden units trained on MNIST (60,000 28×28 digits) with CD1; the geometric path (GA) underestimates its log Z by about "
             f"{s['slides_ga_shortfall']:.0f} nats where the moment-averaged spline (MAS: moment-matched knots, GA between them) does not. "
             "They state neither the initial distribution, nor K, nor the chains, nor any training setting beyond CD1 and the data. "
             "RAISE §5.1 (same group) says its MNIST RBMs are the ones Grosse et al. (2013) evaluated, and gives for mnistCD1-500 at "
             f"K = 10⁵ (Table 1) mean test log-probabilities by GA AIS of {s['raise_ais_uniform']} from a uniform start and "
             f"{s['raise_ais_base_rate']} from the data base rates (RAISE {s['raise_raise_uniform']} and {s['raise_raise_base_rate']}): "
             f"GA from uniform puts log Ẑ {gap:.2f} nats below GA from the base rates, close to the slides' 20; from the base rates "
             "AIS and RAISE agree within 0.68. Generated by `scripts/ablate_ga.py`; raw numbers in `ga_ablation.json`.", ""]
    lines += screen_table(results) + full_table(results) + verdict(results) + full_length(results)
    if results["variants"]:
        lines += ["Limits: the slides and RAISE state no initialisation, learning rate, momentum, weight decay or epochs for their CD1(500), "
                  "so this ablation shows which setting can produce their failure, not that theirs was trained so. The one-setting "
                  f"variants are 5-epoch RBMs (the centre is the zoo's recipe stopped early), but for {FULL_LENGTH} (against the zoo's "
                  "own 60-epoch RBM); a MAS run with an ESS near 1 is one chain's "
                  "weight, an estimate to read beside the other paths, not alone.", ""]
    missing = [f"{name} ({variant.changed})" for name, variant in VARIANTS.items() if "screen" not in results["variants"].get(name, {})]
    if missing:
        lines += ["Defined in `pfzoo.studies.ga_ablation.VARIANTS` but not measured yet: " + "; ".join(missing)
                  + " (`python scripts/ablate_ga.py --stage screen --variants NAME` trains and screens one).", ""]
    measured = sorted({stage["measured_on"] for entry in results["variants"].values() for key, stage in entry.items()
                       if isinstance(stage, dict) and "measured_on" in stage})
    lines += ["Measured " + "; ".join(measured) + ", 1 thread, under `nice -n 10` beside other jobs (times are wall-clock seconds under that load).", ""]
    return "\n".join(lines)
