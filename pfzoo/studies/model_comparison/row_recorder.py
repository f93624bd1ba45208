"""What every row of the model comparison goes through: training the model from its recipe, the step-size pilot, the
evaluation (exact, or HAIS with the pilot's choice, and Fig. 4's shorter runs) and recording the row with its per-patch
values on the common test subset."""

from __future__ import annotations

import itertools
import logging
import math
import time
from typing import Callable

import torch
from omegaconf import DictConfig

from pfzoo.data.splits import DataSplits
from pfzoo.studies.model_comparison.setting_text import SCHEDULE_TEXT, step_text
from pfzoo.studies.model_comparison.settings import PILOT_SEED_OFFSET, SEED_STRIDE, STIFFNESS_GRID, SUBSET_SEED_OFFSET
from pfzoo.studies.step_size_pilot import candidate_settings, pilot_hais
from pfzoo.training.recipe import fit_recipe

logger = logging.getLogger(__name__)


def gen(seed: int) -> torch.Generator:
    """A CPU generator seeded with ``seed``."""
    return torch.Generator().manual_seed(seed)


def total_stderr(evaluation: dict) -> float:
    """A row's ± in the report and in results.json (``evaluation["stderr"]``): the estimator's standard error and the
    test-sampling one (sd over patches / √patches) in quadrature, √(estimator_stderr² + data_stderr²)."""
    return math.hypot(evaluation["estimator_stderr"], evaluation["data_stderr"])


def exact_check(estimate: float, exact: float, stderr: float) -> dict:
    """A HAIS estimate checked against the exact value it estimates: the values, the error and how many of the estimate's
    ``stderr`` it spans, and ``warning``, a line saying the estimate is wrong beyond its stated error when the error
    exceeds 4 stderr and 0.05 nat (4 stderr: a false alarm about once in 16,000 checks of a normal error), else ``None``."""
    error = estimate - exact
    sigmas = abs(error) / stderr if stderr > 0 else math.inf
    wrong = abs(error) > max(4 * stderr, 0.05)
    warning = (f"HAIS is {error:+.3f} nats from the exact value, {sigmas:.1f} of its stderr {stderr:.3f}: "
               "the estimate is wrong beyond its stated error") if wrong else None
    return {"exact": exact, "hais": estimate, "error": error, "log_z_stderr": stderr, "stderrs": sigmas, "warning": warning}


def warning_text(evaluation: dict) -> str:
    """The warnings a row's ``evaluation`` recorded, as one table cell ("" when none; rows measured before the recorder
    kept warnings have no list and show nothing)."""
    return "; ".join(f"⚠ {line}" for line in evaluation.get("warnings", []))


def store_total_stderr(rows: list[dict]) -> list[dict]:
    """``rows`` (results.json's model rows), each measured row's evaluation given its :func:`total_stderr` as ``stderr``:
    what :meth:`RowRecorder.finish` stores, added to rows recorded before it did."""
    for row in (r for r in rows if not r.get("failed")):
        row["evaluation"]["stderr"] = total_stderr(row["evaluation"])
    return rows


class RowRecorder:
    """Trains, evaluates and records models as rows of the comparison on ``splits`` (whitened patches ``[N, 36]``) with the
    budgets ``s`` (one of :data:`~pfzoo.studies.model_comparison.settings.SETTINGS`, possibly overridden), one row per
    model in :attr:`rows`.

    ``recipe(name, seed, *overrides)`` composes ``conf/experiment/<name>.yaml`` into a ``train`` config for these data.
    Every evaluation of a generative model uses the same random subset of ``hais_patches`` test patches
    (:attr:`subset`); the step-size pilots use ``pilot_patches`` training patches. Estimate r draws from a generator
    seeded with ``seed + SEED_STRIDE · r``. :attr:`timers` sums the seconds of training, pilots and evaluation.
    """

    def __init__(self, splits: DataSplits, s: dict, seed: int, recipe: Callable[..., DictConfig]) -> None:
        self.splits, self.s, self.seed, self.recipe = splits, s, seed, recipe
        self.train, self.test = splits.train, splits.test
        self.subset_index = torch.randperm(self.test.shape[0], generator=gen(seed + SUBSET_SEED_OFFSET))[: s["hais_patches"]]
        self.subset = self.test[self.subset_index]
        self.pilot_data = self.train[torch.randperm(self.train.shape[0], generator=gen(seed + PILOT_SEED_OFFSET))[: s["pilot_patches"]]]
        self.rows: list[dict] = []
        self.timers = {"training": 0.0, "pilot": 0.0, "evaluation": 0.0}
        self._estimates = itertools.count(1)

    def next_seed(self) -> int:
        """The seed of the next estimate: estimate r draws from ``seed + SEED_STRIDE · r``."""
        return self.seed + SEED_STRIDE * next(self._estimates)

    def finish(self, row: dict, e: dict) -> dict:
        """Store the evaluation ``e`` in ``row`` (with its per-patch values on the common subset and its
        :func:`total_stderr` as ``stderr``) and add the row."""
        per_example = e.pop("per_example")
        e["stderr"] = total_stderr(e)
        values = (per_example[self.subset_index] if e["test_patches"] == self.test.shape[0]
                  else per_example if e["test_patches"] == self.subset.shape[0] else None)
        row.update(evaluation=e, subset_per_example=None if values is None else values.tolist(), shared_stderr=e.get("log_z_stderr", 0.0),
                   subset_mean=None if values is None else values.mean().item())
        self.rows.append(row)
        self.timers["evaluation"] += e["seconds"]
        logger.info("%s", f"{row['label']}: {e['mean']:.3f} ± {e['stderr']:.3f} ({e['kind']})"
                    + ("" if values is None else f", same patches {row['subset_mean']:.3f}") + f"; train {row['train_seconds']:.1f} s, eval {e['seconds']:.1f} s")
        return row

    def exact(self, row: dict, model) -> dict:
        """Evaluate ``model`` exactly (closed-form log-likelihood) on every test patch."""
        began = time.perf_counter()
        with torch.no_grad():
            per_example = model.log_prob(self.test).double()
        return self.finish(row, {"per_example": per_example, "mean": per_example.mean().item(), "estimator_stderr": 0.0, "kind": "exact",
                                 "data_stderr": (per_example.std() / math.sqrt(len(per_example))).item(), "seconds": time.perf_counter() - began,
                                 "estimator": "exact (closed form)", "test_patches": len(per_example)})

    def pilot_and_evaluate(self, row: dict, model, data: torch.Tensor, chains: int, steps: int, latent: bool = True,
                           convergence: bool = False) -> dict:
        """The step-size pilot (per-example log p̂(x) on training patches for generative models, else log Ẑ), then HAIS with
        its choice; with ``convergence`` also the same estimate at every N of ``convergence_steps`` (Fig. 4, :meth:`convergence_runs`)."""
        s, began = self.s, time.perf_counter()
        pilot_chains, pilot_steps = (s["pilot_particles"], s["pilot_steps"]) if latent else (s["pilot_chains"], s["pilot_logz_steps"])
        result = pilot_hais(model, candidate_settings(stiffness_grid=STIFFNESS_GRID if latent else ()), num_chains=pilot_chains, num_steps=pilot_steps,
                            data=self.pilot_data if latent else None, base="isotropic", generator=gen(self.next_seed()))
        chosen = result.setting
        row["pilot"] = {"trials": [{**vars(t.setting), "bound": t.bound, "stderr": t.stderr, "seconds": t.seconds, "acceptance_mean": t.acceptance_mean,
                                    "acceptance_last_10pct": t.acceptance_last} for t in result.trials],
                        **vars(chosen), "what": result.what, "num_steps": pilot_steps, "chains": pilot_chains,
                        "patches": self.pilot_data.shape[0] if latent else None}
        self.timers["pilot"] += time.perf_counter() - began
        estimator, began = chosen.estimator(chains, steps, base="isotropic"), time.perf_counter()
        e = (estimator.log_likelihood(model, data, generator=gen(self.next_seed())) if latent
             else estimator.log_likelihood(model, self.test, base_data=self.train, generator=gen(self.next_seed())))
        acceptance = e.info.get("acceptance") or e.partition.info["acceptance"]
        what = f"{step_text(chosen.step_size, chosen.stiffness)}, {SCHEDULE_TEXT[chosen.schedule]}"
        evaluation = {"per_example": e.per_example, "mean": e.mean, "estimator_stderr": e.stderr, "data_stderr": e.data_stderr, "kind": e.kind.value,
                      "seconds": time.perf_counter() - began, "num_steps": steps, "test_patches": data.shape[0],
                      "acceptance_mean": sum(acceptance) / len(acceptance), "acceptance_last_10pct": acceptance[-1], "warnings": list(e.warnings)}
        if latent:
            evaluation.update(estimator=f"per-example HAIS, {what}", particles=chains)
        else:
            evaluation.update(estimator=f"HAIS log Z from N(0, I), {what}", chains=chains, log_z=e.partition.log_z,
                              log_z_stderr=e.partition.stderr, ess=e.partition.ess)
        if convergence:
            evaluation["convergence"] = self.convergence_runs(model, chosen, data, e, chains, steps, latent)
        return evaluation

    def convergence_runs(self, model, chosen, data: torch.Tensor, final, chains: int, steps: int, latent: bool) -> list[dict]:
        """Fig. 4: the evaluation ``final`` (made at ``steps``) repeated at every N of ``convergence_steps`` below it, with
        the same setting ``chosen``. Per-example estimates use ``convergence_particles`` particles on the first
        ``convergence_patches`` patches of ``data``, log Ẑ estimates ``chains`` chains; the last entry is ``final`` itself on
        those patches. Entries: N, the mean log-likelihood on those patches, its estimator stderr, seconds."""
        s, began, runs = self.s, time.perf_counter(), []
        patches = data[: s["convergence_patches"]] if latent else None
        for num_steps in (n for n in s["convergence_steps"] if n < steps):
            estimator, began_run = chosen.estimator(s["convergence_particles"] if latent else chains, num_steps, base="isotropic"), time.perf_counter()
            if latent:
                e = estimator.log_likelihood(model, patches, generator=gen(self.next_seed()))
                runs.append({"num_steps": num_steps, "mean": e.mean, "stderr": e.stderr, "seconds": time.perf_counter() - began_run,
                             "warnings": list(e.warnings)})
            else:
                log_z = estimator(model, data=self.train, generator=gen(self.next_seed()))
                runs.append({"num_steps": num_steps, "log_z": log_z.log_z, "stderr": log_z.stderr, "ess": log_z.ess,
                             "mean": final.mean + final.partition.log_z - log_z.log_z, "seconds": time.perf_counter() - began_run,
                             "warnings": list(log_z.warnings)})
        last = final.per_example[: s["convergence_patches"]].mean().item() if latent else final.mean
        runs.append({"num_steps": steps, "mean": last, "stderr": final.stderr, "seconds": None, "final": True})
        self.timers["convergence"] = self.timers.get("convergence", 0.0) + time.perf_counter() - began
        return runs

    def fail(self, row: dict, reason: str) -> dict:
        """Add ``row`` as failed for ``reason``."""
        row["failed"] = reason
        self.rows.append(row)
        logger.info("%s: FAILED: %s", row["label"], reason)
        return row

    def fit_em(self, name: str, run_seed: int, epochs: int, *overrides: str, model=None) -> tuple:
        """EM-HMC (or persistent MPF) from a recipe (with ``overrides``), with burn-in E-steps for EM; the row fields describing the training."""
        s = self.s
        cfg = self.recipe(name, run_seed, f"trainer.epochs={epochs}", *overrides)
        em = cfg.trainer.objective._target_.endswith("EMHMC")
        fit = fit_recipe(cfg, self.splits, model=model, burn_in=s["em_burn_in"] if em else 0, generator=gen(run_seed + 3))
        adaptation = (fit.objective if em else fit.objective.continuous).adaptation  # EMHMC's, or MPF's PersistentMPF's
        self.timers["training"] += fit.seconds
        losses = [r["loss"] for r in fit.records]
        finite = all(torch.isfinite(p).all().item() for p in fit.model.parameters())
        info = {"epochs": epochs, "batch_size": cfg.trainer.batch_size, "losses": losses, "final_loss": losses[-1] if losses else None,
                "sampler_acceptance": [a for a, _ in adaptation], "sampler_step_size": [v for _, v in adaptation], "seconds": fit.seconds,
                "error": fit.error if fit.error or finite else "parameters are NaN or infinite after training"}
        if em:
            info.update(burn_in_e_steps=s["em_burn_in"], final_step_size=fit.objective.step_size.item())
        losses_text = ", ".join(f"{x:.1f}" for x in losses[:: max(1, len(losses) // 6)])
        return fit.model.requires_grad_(False), cfg, info, {"train_seconds": fit.seconds, "training": info}, losses_text
