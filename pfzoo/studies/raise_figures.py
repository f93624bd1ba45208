"""RAISE Figures 3, 4 and 7 in kind (Burda, Grosse & Salakhutdinov 2015): AIS and RAISE against the number of
intermediate distributions K, one picture per binarized-MNIST model, drawn from ``estimators/raise/results.json``'s
sweeps (what :func:`pfzoo.studies.bracket_sweep.bracket_sweep` measured)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def sweep_figure(title: str, rows: list[dict], path: str | Path, *, exact: float | None = None, note: str = "") -> Path:
    """Write ``path``: AIS (biased upward) and RAISE (a stochastic lower bound) with their standard errors against K
    (log scale), the exact test log-likelihood as a line where the model has one; ``rows`` are results.json sweep rows
    (``steps``, ``ais``, ``ais_stderr``, ``raise``, ``raise_stderr``). Returns the path."""
    rows = sorted(rows, key=lambda row: row["steps"])
    steps = [row["steps"] for row in rows]
    figure, axis = plt.subplots(figsize=(6.4, 4.4))
    axis.errorbar(steps, [row["ais"] for row in rows], yerr=[row["ais_stderr"] for row in rows], marker="o", capsize=3,
                  label="AIS (log Ẑ a lower bound: biased upward)")
    axis.errorbar(steps, [row["raise"] for row in rows], yerr=[row["raise_stderr"] for row in rows], marker="s", capsize=3,
                  label="RAISE (a stochastic lower bound)")
    if exact is not None:
        axis.axhline(exact, color="k", linestyle="--", linewidth=1, label=f"exact ({exact:.2f})")
    axis.set_xscale("log")
    axis.set_xticks(steps, [f"{k:,}" for k in steps])
    axis.minorticks_off()
    axis.set_xlabel("K (intermediate distributions, linear β)")  # the title names the initial distribution
    axis.set_ylabel("mean test log-likelihood (nats)")
    axis.set_title(title + (f"\n{note}" if note else ""), fontsize=10)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8, loc="best")
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
