"""Why generalized score matching stays at its base-rate start (issue 52): the objective against Lyu's divergence by
enumeration, its minimiser on the exact distribution of small teacher RBMs, and on 20,000 exact samples of two 12×6 RBMs
(weights N(0, 1) and N(0, 2²)) which of objective, gradient and optimiser holds it (:mod:`pfzoo.studies.gsm_diagnosis`).

    python scripts/diagnose_gsm.py                 # reports/principles/gsm_diagnosis.json (about 10 minutes on one thread)
    python scripts/diagnose_gsm.py --quick         # a smoke run: 6×3 teacher, 2,000 samples, 2 epochs; /tmp/gsm_diagnosis_quick.json
    python scripts/diagnose_gsm.py --render reports/principles/gsm_diagnosis.json   # the README section's tables, to stdout
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import torch

from pfzoo.studies import gsm_diagnosis as study
from pfzoo.studies.reporting import load_average, machine_description

REPO = Path(__file__).resolve().parents[1]
TINY = ((4, 2), (5, 3), (6, 3))
SCALES = (1.0, 2.0)  # the teacher's weight scale: N(0, 1) and N(0, 4) weights


def run(args) -> dict:
    began = time.perf_counter()
    tiny = [study.formula_check(study.Setting(v, h, seed=args.seed), max_iter=100 if args.quick else 1000) for v, h in TINY]
    if args.quick:
        finite = [study.finite_sample_study(study.Setting(6, 3, num_samples=2000, seed=args.seed), adam_rates=(1e-2,),
                                            protocol_rates=(1e-3,), sgd_rates=(("GSM", (0.1,)),), epochs=2, lbfgs_iter=50)]
    else:
        finite = [study.finite_sample_study(study.Setting(12, 6, scale=scale, num_samples=20000, seed=args.seed)) for scale in SCALES]
    return {"command": "python " + " ".join(sys.argv), "tiny": tiny, "finite_sample": finite,
            "machine": machine_description(), "threads": args.threads, "load_average": load_average(),
            "date": datetime.date.today().isoformat(), "seconds": time.perf_counter() - began, "quick": args.quick}


def render(results: dict) -> str:
    """The tables of the README section from a results.json payload (markdown)."""
    lines = ["| teacher (V×H) | max abs(L + C − D) | max abs(∇L − ∇D) | ‖∇L‖ at teacher | KL at minimiser from start "
             "| from teacher | from W = 0 (‖∇L‖) | uncorrected form's minimiser KL |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for entry in results["tiny"]:
        s, fits = entry["setting"], entry["fits"]
        lines.append(f"| {s['num_visible']}×{s['num_hidden']} | {max(p['abs_value_difference'] for p in entry['probes']):.1e} "
                     f"| {max(p['max_abs_gradient_difference'] for p in entry['probes']):.1e} | {entry['gradient_norm_at_teacher']:.1e} "
                     f"| {fits['from base-rate start']['kl_fit']:.1e} | {fits['from teacher']['kl_fit']:.1e} "
                     f"| {fits['from base-rate RBM with W = 0']['kl_fit']:.4f} ({fits['from base-rate RBM with W = 0']['gradient_norm']:.0e}) "
                     f"| {fits['uncorrected form, from base-rate start']['kl_fit']:.3f} |")
    for f in results["finite_sample"]:
        lines += finite_tables(f)
    return "\n".join(lines) + "\n"


def finite_tables(f: dict) -> list[str]:
    """The tables of one finite-sample teacher (markdown lines)."""
    s = f["setting"]
    lines = ["", f"**{s['num_visible']}×{s['num_hidden']} teacher, weights N(0, {s['scale']:g}²), {s['num_samples']} exact samples**"]
    lines += ["", "| at the teacher | loss on the sample | population loss | per-row std | std. error of the mean |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {k} | {t['sample']:.4g} | {t['population']:.4g} | {t['row_std']:.4g} | {t['standard_error']:.3g} |"
              for k, t in f["loss_at_teacher"].items()]
    g = f["loss_at_teacher"]["GSM"]
    lines += ["", f"GSM's largest positive single-state term of the sample loss at the teacher: {g['largest_term']:.4g} ({g['largest_term_rows']} rows of loss "
              f"{g['largest_term_row_loss']:.4g} each). The principles grid {list(study.PRINCIPLES_GSM_GRID)} with early stopping picks: "
              + "; ".join(f"{k} lr {c['lr']:g}, update {c['kept_update']}, closure {c['final_closure']:.1%}" for k, c in f["grid_choice"].items())]
    lines += ["", "| sample | value |", "|---|---:|"] + [f"| {k.replace('_', ' ')} | {v if isinstance(v, int) else f'{v:.4g}'} |" for k, v in f["sample"].items()]
    lines += ["", "| t (start → teacher) | GSM loss, sample | GSM loss, population | eq. (1) to sample | R(θ) | KL |", "|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {e['t']} | {e['sample_loss']:.3f} | {e['population_loss']:.3f} | {e['lyu_divergence_to_sample']:.3f} "
              f"| {e['unobserved_flip_term']:.3f} | {e['kl']:.4f} |" for e in f["landscape"]]
    lines += ["", "| objective at the start | ‖full gradient‖ | minibatch noise (rms) | signal/noise | cos(−∇, teacher − start) |",
              "|---|---:|---:|---:|---:|"]
    lines += [f"| {k} | {g['full_norm']:.4g} | {g['minibatch_noise']:.4g} | {g['signal_to_noise']:.3g} | {g['cosine_to_teacher']:.3f} |"
              for k, g in f["gradients_at_start"].items()]
    lines += ["", "| full-batch L-BFGS | evaluations | stopped | lowest KL passed (evaluation, loss) | closure there "
              "| final KL | lowest loss |", "|---|---:|---|---:|---:|---:|---:|"]
    for k, r in f["full_batch"].items():
        b = r["best_score"]
        lines.append(f"| {k} | {r['evaluations']} | {r['stopped']} | {b['score']:.4g} ({b['evaluation']}, {b['loss']:.4g}) "
                     f"| {r['closure_at_best']:.1%} | {r['end']['score']:.4g} | {r['lowest_loss']:.4g} |")
    lines += ["", "| minibatch run | lr | KL at 200 | KL at 1000 | lowest KL (update) | closure there | final KL (update) "
              "| non-finite at |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    fmt = lambda v: "—" if v is None else f"{v:.4g}"  # noqa: E731
    for r in f["trajectories"]:
        lines.append(f"| {r['principle']}, {r['optimizer']} | {r['lr']:g} | {fmt(r['kl_at_200'])} | {fmt(r['kl_at_1000'])} "
                     f"| {r['best_kl']:.4g} ({r['best_update']}) | {r['best_closure']:.1%} | {r['final_kl']:.4g} ({r['final_update']}) "
                     f"| {r['non_finite_at'] or '—'} |")
    lines += ["", "| protocol (Adam, early stopping) | lr | stopped at | kept update | validation log-lik. | KL of the retrained model "
              "| closure |", "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['principle']} | {r['lr']:g} | {r['stopped_at']} | {r['kept_update']} | {r['valid_log_likelihood']:.4f} "
              f"| {r['final_kl']:.4g} | {r['final_closure']:.1%} |" for r in f["protocol"]]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--render", type=Path, default=None, help="print the README section's tables of this gsm_diagnosis.json")
    args = parser.parse_args()
    if args.render:
        sys.stdout.write(render(json.loads(args.render.read_text())))
        return
    torch.set_num_threads(args.threads)
    out = args.out or (Path("/tmp/gsm_diagnosis_quick.json") if args.quick else REPO / "reports" / "principles" / "gsm_diagnosis.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(run(args), indent=1))
    sys.stdout.write(f"wrote {out}\n")


if __name__ == "__main__":
    main()
