"""The human-readable reports of :func:`~pfzoo.app.train`'s and :func:`~pfzoo.app.evaluate`'s results (the command line
prints them; the results themselves are plain dicts, written as JSON)."""

from __future__ import annotations

import json
from typing import Any

from pfzoo.estimators.base import BoundKind


def format_training(result: dict[str, Any]) -> str:
    """A human-readable report of :func:`train`'s result, ending with the test log-likelihood."""
    metrics = ", ".join(f"{key} {value:.4g}" for key, value in result["metrics"].items() if isinstance(value, float))
    if result.get("diverged"):  # metrics: the divergence guard's details (pfzoo.training.TrainingDiverged.record)
        metrics = (f"stopped by the divergence guard in epoch {result['metrics']['epoch']}; the checkpoint holds the parameters "
                   f"after update {result['metrics']['restored_update']}")
    lines = [
        f"final epoch: {metrics}",
        f"metrics written to {result['metrics_file']}",
        f"checkpoint written to {result['checkpoint']}",
    ]
    if result.get("pictures"):
        lines.append("pictures: " + ", ".join(result["pictures"]))
    final = result.get("test_log_likelihood")
    if "nce_c" in result["metrics"]:  # NCE's learned normaliser, beside the log Z the closing estimate used
        beside = "" if final is None or final.get("log_z") is None else f" ({final['estimator']}: −log Z = {-final['log_z']:.4f})"
        lines.append(f"NCE's c: −log Z ≈ {result['metrics']['nce_c']:.4f}{beside}")
    if final is None:
        lines.append(f"test log-likelihood: not measured (see the warning above); {result['seconds']:.1f} s in all")
    else:
        error = "" if final["kind"] == BoundKind.EXACT.value else (
            f" ± {final['stderr']:.4f} ({final['estimator']} on {final['num_test']} of {final['of']} test examples)")
        sampling = "" if final.get("data_stderr") is None else f"; ± {final['data_stderr']:.4f} test-set sampling"
        lines.append(f"test log-likelihood  = {final['mean']:.4f}{error}; {final['kind']}{sampling}; {result['seconds']:.1f} s in all")
    return "\n".join(lines)


def format_evaluation(result: dict[str, Any]) -> str:
    """A human-readable report of :func:`evaluate`'s result."""
    if "comparison" in result:
        return format_comparison(result)
    source = f"pretrained={result['pretrained']} ({result['checkpoint']})" if result.get("pretrained") else result["checkpoint"]
    lines = [f"model {result['model']} {result['model_config']} from {source}"]
    upper = result.get("upper", result)
    if "log_z" in upper:
        exact = f"   (exact {result['exact_log_z']:.4f})" if "exact_log_z" in result else ""
        ess = f"  (ESS {upper['ess']:.1f})" if upper["ess"] is not None else ""
        lines.append(f"log Z                = {upper['log_z']:.4f} ± {upper['log_z_stderr']:.4f}{ess}{exact}")
        if "path_diagnostics" in upper:
            lines.append(f"path cost ½ΣJ_k      = {upper['path_diagnostics']['cost_functional']:.4f} nats "
                         f"(≈ the bias of E[log w]; per-step increments and ESS in evaluation.json)")
    exact = f"   (exact {result['exact_test_log_likelihood']:.4f})" if "exact_test_log_likelihood" in result else ""
    if "upper" in result:
        lines.append(f"upper estimate       = {upper['test_log_likelihood']:.4f} ± {upper['test_log_likelihood_stderr']:.4f}  ({upper['kind']})")
        lines.append(f"gap upper − lower    = {result['gap']:.4f} ± {result['gap_stderr']:.4f}")
    split = result.get("split", "test")
    label = "lower estimate      " if "upper" in result else f"{split + ' log-likelihood':<20}"
    lines.append(f"{label} = {result['test_log_likelihood']:.4f} ± {result['test_log_likelihood_stderr']:.4f}{exact}")
    lines.append(
        f"  over {examples(result)} {result['dataset']} {split} examples (± {result['test_log_likelihood_data_stderr']:.4f} "
        f"{split}-set sampling error); {result['kind']}; {result['seconds']:.1f} s"
    )
    for side in (upper, result) if "upper" in result else (result,):
        if "markov_bound" in side:
            lines.append(f"  guaranteed: {side['markov_bound']['statement']}")
    if "acceptance" in upper:
        lines.append("  kernel acceptance along the schedule: " + " ".join(f"{a:.2f}" for a in upper["acceptance"]))
    if result["kind"] != BoundKind.EXACT.value:
        lines.append(f"  estimator: {json.dumps(result['estimator'])}")
    if result.get("more_accuracy"):
        lines.append("more accuracy (slower): " + " ".join(result["more_accuracy"]))
    if result.get("card_log_likelihood"):
        lines.append(card_line(result["card_log_likelihood"]))
    if result.get("pictures"):
        lines.append("pictures: " + ", ".join(result["pictures"]))
    lines.extend(f"WARNING: {warning}" for warning in result.get("warnings", []))
    return "\n".join(lines)


def card_line(card: dict[str, Any]) -> str:
    """The zoo card's own figure for the model, to read this run's estimate against (``pfzoo zoo`` lists the same)."""
    error = f" ± {card['stderr']:.4f}" if card.get("stderr") else ""
    how = card.get("label") or card.get("estimator")  # the label names the estimator and how it ran (K, start, chains)
    examples = f" on {card['num_test']:,} test examples" if card.get("num_test") else ""
    return f"the model card's figure: {card['value']:.4f}{error} ({how}{examples})"


def format_comparison(result: dict[str, Any]) -> str:
    """A human-readable report of ``evaluate`` with ``versus=``: which model is better and by how much."""
    comparison = result["comparison"]
    better, worse = ("A", "B") if comparison["better"] == "A" else ("B", "A")
    verdict = "significantly" if comparison["significant"] else "not significantly (within 3 standard errors)"
    if result.get("warnings"):
        verdict += " if the estimate can be trusted (see the warnings)"
    lines = [
        f"A: {result['model']} from {result['checkpoint']}",
        f"B: {result['versus_model']} from {result['versus']}",
        f"mean log p_A − log p_B = {comparison['difference']:.4f} ± {comparison['stderr']:.4f} (estimator) "
        f"± {comparison['data_stderr']:.4f} ({result.get('split', 'test')}-set sampling) over {examples(result)} {result['dataset']} "
        f"{result.get('split', 'test')} examples",
        f"log Z_A − log Z_B      = {comparison['log_z_difference']:.4f} ± {comparison['log_z_difference_stderr']:.4f} "
        f"(bridge sampling, {comparison['num_samples']} draws of each model"
        f"{', each annealed to the other in ' + str(comparison['num_steps']) + ' steps' if comparison['num_steps'] > 1 else ''}); "
        f"{result['seconds']:.1f} s",
        f"  one-sided estimates  {comparison['log_z_difference_bracket'][0]:.4f} (from B's draws, a lower bound) and "
        f"{comparison['log_z_difference_bracket'][1]:.4f} (from A's draws, an upper bound)",
        f"{better} fits the {result.get('split', 'test')} set better than {worse}, {verdict}, by {abs(comparison['difference']):.4f} nats per example",
    ]
    lines.extend(f"WARNING: {warning}" for warning in result.get("warnings", []))
    return "\n".join(lines)


def examples(result: dict[str, Any]) -> str:
    """Which test examples a result measured, as its report names them: ``all 360``, ``100 of 10000 (drawn at random,
    seed 0)``, ... (:func:`pfzoo.data.describe_subset`); the bare count for a result that does not record them."""
    rows = result.get("test_rows")
    return rows["description"] if rows else str(result["num_test"])
