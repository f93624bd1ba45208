"""Draw the slides' "Restricted Boltzmann Machines" picture: an MNIST RBM's intermediate distributions along the geometric
path (GA) and the moment-averaged spline (MAS), as Gibbs samples at a few β (Grosse, Maddison & Salakhutdinov 2013).

    python scripts/draw_path_samples.py --data-root ../shared/data     # reports/paths/path_samples.{png,json}
    python scripts/reproduce_paths.py --render reports/paths/results.json   # then the README's section (c)

The slide names no RBM, β or base, and does not say whether it shows samples or means; chosen here: the zoo's PCD(20) RBM
(the slides' next slide's model, and one whose target moments enumerate exactly), a uniform base (the slides' start,
reports/paths (b′)), the spline's knots β = j/6 (so each MAS row at a knot is a moment-matched RBM), chain means beside
samples. Writes path_samples.png and path_samples.json (settings, equilibrium checks, the reading) in --out-dir and
stores the JSON under the key ``path_samples`` of its results.json (other keys untouched), from which
``scripts/reproduce_paths.py --render`` puts the section into reports/paths/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
from pathlib import Path

import torch

from pfzoo import zoo
from pfzoo.data import binarized_mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.paths import exact_rbm_moments
from pfzoo.studies.path_samples import PATH_LABELS, path_samples, samples_figure
from pfzoo.studies.reporting import machine_description

REPO = Path(__file__).resolve().parents[1]


def reading(checks: dict, betas: list[float]) -> str:
    """The paragraph under the picture: the equilibrium verdict from the checks (a β is flagged where the two starts' mean
    densities differ by more than 3 stderr or their per-pixel means by an RMS ratio above 1.5), then what the rows show."""
    parts = []
    for kind, label in PATH_LABELS.items():
        flagged = [f"β = {b:.2f} (density {c['density_difference']:+.3f} ± {c['density_stderr']:.3f}, RMS ratio {c['rms_ratio']:.2f})"
                   for b, c in zip(betas, checks[kind]) if abs(c["density_difference"]) > 3 * c["density_stderr"] or c["rms_ratio"] > 1.5]
        parts.append(f"{label.split(' (')[0]}: " + ("chains at " + "; ".join(flagged) + " still remember their start" if flagged
                                                     else "the two starts agree at every β"))
    return "Equilibrium: " + ". ".join(parts) + ". " + READING


READING = ("Against the slide, which draws the two paths' intermediate distributions and states no number: along GA (from the "
           "uniform base p_β ∝ f^β: weights and biases scaled by β) the background pixels switch off early, so from β ≈ 1/3 the "
           "chain mean is a dark blob on a clear background, and the samples are rings and blobs that become recognisable digits "
           "only near β = 1; along MAS the knots match the averaged moments (1 − β) s_0 + β s_1 (the slide's equation), so each pixel's "
           "on-probability moves linearly from ½ to the target's (the chain mean fades from grey into the target's mean "
           "digit) and the samples are digit strokes on salt-and-pepper noise that fades with β. GA sharpens an average "
           "towards the target; MAS keeps the target's digit shapes at every β and mixes them with noise. The picture does not "
           "say which path anneals better: parts (b) and (b′) measure that.")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=None, help="folder holding binarized_mnist/")
    parser.add_argument("--model", default="rbm-binarized_mnist-pcd-20", help="zoo folder under models/")
    parser.add_argument("--betas", type=float, nargs="+", default=[j / 6 for j in range(7)])
    parser.add_argument("--chains", type=int, default=100, help="chains per β and path (half from base draws, half from digits)")
    parser.add_argument("--sweeps", type=int, default=15000, help="block-Gibbs sweeps per chain")
    parser.add_argument("--shown", type=int, default=8, help="samples drawn per β")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", type=Path, default=REPO / "reports" / "paths")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    data_root = resolve_data_root(args.data_root or os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
    model = zoo.load(REPO / "models" / args.model / "checkpoint.pt")
    train = binarized_mnist(data_root).train
    exact = model.num_hidden <= 20  # the knots' target moments by enumeration where the hidden layer enumerates
    options = {"target_moments": exact_rbm_moments(model)} if exact else {}
    out = path_samples(model, train, args.betas, chains=args.chains, sweeps=args.sweeps, generator=torch.Generator().manual_seed(args.seed),
                       **options)
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure = samples_figure(out, args.betas, shown=args.shown)
    figure.savefig(args.out_dir / "path_samples.png", dpi=110)
    plt.close(figure)
    checks = {kind: out[kind]["checks"] for kind in PATH_LABELS}
    spline = ("MAS: the path builder's default 5 evenly spaced knots, fitted to the target's exact moments (enumerated over "
              "the 2^20 hidden states)." if exact else "MAS: the path builder's defaults.")
    entry = {"settings": {"model": args.model, "base": "uniform", "betas": args.betas, "chains": args.chains, "sweeps": args.sweeps,
                          "shown": args.shown, "seed": args.seed, "spline": spline},
             "checks": checks, "build_seconds": {kind: out[kind]["build_seconds"] for kind in PATH_LABELS},
             "sample_seconds": round(sum(out[kind]["sample_seconds"] for kind in PATH_LABELS), 1),
             "machine": machine_description(), "date": datetime.date.today().isoformat(), "reading": reading(checks, args.betas)}
    (args.out_dir / "path_samples.json").write_text(json.dumps(entry, indent=1) + "\n")
    results_file = args.out_dir / "results.json"
    results = json.loads(results_file.read_text()) if results_file.is_file() else {}
    results["path_samples"] = entry
    results_file.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out_dir}/path_samples.png, path_samples.json and results.json's path_samples")


if __name__ == "__main__":
    main()
