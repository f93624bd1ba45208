"""The model comparison's plots, drawn from what results.json holds: Fig. 4 (estimates against N) and Fig. 5 (sparse
coding against its number of latents)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pfzoo.studies.model_comparison.settings import DIM

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def convergence_figure(rows: list[dict], meta: dict) -> Figure:
    """Fig. 4: every HAIS row's estimate minus its value at the largest N, against N; the caller saves and closes it."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.8, 6.4))
    for row in (r for r in rows if not r.get("failed") and r["evaluation"].get("convergence")):
        conv, latent = row["evaluation"]["convergence"], "log_z" not in row["evaluation"]
        final = conv[-1]["mean"]
        ax.errorbar([c["num_steps"] for c in conv], [c["mean"] - final for c in conv], yerr=[c["stderr"] for c in conv], marker="o" if latent else "s",
                    linestyle="-" if latent else "--", capsize=3, label=f"{row['label']} ({'per-example' if latent else 'log Ẑ'}; {final:.2f} at the last N)")
    ax.axhline(0.0, color="k", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1.0)  # short runs of the generative models are hundreds of nats low; the log Ẑ rows move by tenths
    ax.set_xlabel("intermediate distributions N")
    ax.set_ylabel("estimate − estimate at the largest N (nats per patch, symlog)")
    ax.set_title(f"HAIS estimates against N ({meta['source']} patches)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False)
    fig.tight_layout()
    return fig


def sweep_figure(sweep: list[dict], references: dict, meta: dict) -> Figure:
    """Fig. 5: the sparse-coding rows' log-likelihood against the number of latents, with the exact ``references``
    (label → mean on the same patches) as lines; the caller saves and closes it."""
    import matplotlib.pyplot as plt

    ok = [p for p in sweep if not p.get("failed")]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.errorbar([p["num_latent"] for p in ok], [p["mean"] for p in ok], yerr=[p["stderr"] for p in ok], marker="o", capsize=3,
                label="Laplace linear generative (per-example HAIS, lower bound)")
    for (name, value), style in zip(references.items(), (":", "--", "-.")):
        ax.axhline(value, color="k", linestyle=style, linewidth=1, label=f"{name} (exact, same patches)")
    ax.axvline(DIM, color="0.7", linewidth=0.8)
    if references and ok:  # keep the axis on the interesting range; mark far-off points (e.g. undercomplete L) at the bottom edge
        shown = [p for p in ok if p["mean"] >= min(references.values()) - 60]
        values = list(references.values()) + [p["mean"] + sign * p["stderr"] for p in shown for sign in (-1, 1)]
        low, high = min(values) - 5, max(values) + 5
        ax.set_ylim(low, high)
        for p in (p for p in ok if p["mean"] < low):
            ax.annotate(f"L = {p['num_latent']}: {p['mean']:.0f} ± {p['stderr']:.0f}\n(off scale)", xy=(p["num_latent"], low),
                        xytext=(p["num_latent"] + 4, low + 0.3 * (high - low)), ha="left", fontsize=8, arrowprops={"arrowstyle": "->", "color": "C0"})
    ax.set_xticks([p["num_latent"] for p in sweep])
    ax.set_xlabel("number of latents L (M = 36)")
    ax.set_ylabel("test log-likelihood (nats per patch)")
    ax.set_title(f"Sparse coding vs number of latents ({meta['source']} patches, {meta['subset_size']} test patches)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig
