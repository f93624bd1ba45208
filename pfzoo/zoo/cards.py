"""Model cards: a zoo folder's machine-readable ``card.json`` (:data:`CARD_FIELDS`) and the ``README.md`` rendered from
it (:func:`render_card`, :class:`ModelCard`)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pfzoo.zoo.checkpoints import CHECKPOINT_FILE, check_plain, file_sha256

CARD_FILE = "README.md"
CARD_DATA_FILE = "card.json"
CARD_FORMAT = "pfzoo-card-1"
ACCURACY_METRIC = "test accuracy"  # a measurement's "metric" when it is a classifier's accuracy, not a log-likelihood
RECOGNITION_METRIC = "samples recognised"  # ... when it is the share of samples a digit classifier recognises
SECTION_METRICS = (ACCURACY_METRIC, RECOGNITION_METRIC)
"""The measurements' metrics that have a section of their own rather than a row of the log-likelihood table."""
SAMPLES_PICTURE = "samples.png"  # beside a card: its samples-recognised measurement's first samples and real digits
CARD_FIELDS = {
    "format": f"{CARD_FORMAT!r}",
    "name": "the folder's name, what pretrained(name) takes",
    "family": "the model's registry name (pfzoo.models.model_class(family) rebuilds it)",
    "model_config_name": "the conf/model config it was composed from (poe_laplace and poe_student share a family)",
    "model_config": "constructor keyword arguments (model.config())",
    "dataset": "the data set's name (DataSplits.name)",
    "dataset_config": "the resolved conf/dataset node it was trained and measured on (no machine paths)",
    "data_licence": "the licence of the training data",
    "recipe": "{experiment, command, config}: the conf/experiment recipe and the resolved training config (no machine paths)",
    "log_likelihood": "{estimator, kind, value, stderr, data_stderr, num_test, settings, ...}: the measured mean test log-likelihood",
    "log_likelihood_at_init": "the same measurement of the model before training (null when not measured)",
    "date": "when it was trained (YYYY-MM-DD)",
    "pfzoo_version": "the package version that trained it",
    "git_commit": "the commit of the checkout that trained it (null when unknown)",
    "training_seconds": "wall time of the training run (null when unknown)",
    "checkpoint": "{file, sha256, bytes} of checkpoint.pt",
}
"""card.json's keys; ``title``, ``summary``, ``notes`` (a list of sentences) and ``measurements`` (further rows like
``log_likelihood``, each with a ``label``) are optional. A measurement with ``"metric": "test accuracy"`` is a linear
classifier on the model's hidden features (``value``, beside ``pixels``, ``chance``, ``num_features``, ``num_train``,
``num_test``, ``data``, ``settings``; ``scripts/feature_card.py``) and has its own section; so has one with
``"metric": "samples recognised"`` (:func:`pfzoo.studies.sample_recognition.sample_recognition`'s fields,
``scripts/sample_card.py``) and a DBM's ``depth`` (:func:`pfzoo.studies.dbm_depth.depth_diagnostic`,
``scripts/dbm_depth.py``)."""


@dataclass(frozen=True)
class ModelCard:
    """A zoo folder's ``README.md``: what the model is, how it was made, what was measured.

    title: the heading (without ``#``). summary: a paragraph under it. facts: ``(name, value)`` rows of a two-column
    table (architecture, data, training command, file, ...). sections: ``(heading, markdown body)`` pairs, each
    rendered as a ``##`` section. Values are markdown and written as given.
    """

    title: str
    summary: str = ""
    facts: Sequence[tuple[str, str]] = ()
    sections: Sequence[tuple[str, str]] = ()

    def render(self) -> str:
        """The card as markdown: blocks separated by blank lines, ending in one newline."""
        blocks = [f"# {self.title}"]
        if self.summary:
            blocks.append(self.summary)
        if self.facts:
            blocks.append("\n".join(["| | |", "|---|---|", *(f"| {name} | {value} |" for name, value in self.facts)]))
        blocks += [f"## {heading}\n\n{body.strip()}" for heading, body in self.sections]
        return "\n\n".join(block.strip("\n") for block in blocks) + "\n"


def write_card(folder: str | os.PathLike, card: Mapping[str, Any], *, readme: bool = True) -> dict[str, Any]:
    """Write ``<folder>/card.json`` from ``card`` with ``checkpoint`` set to ``<folder>/checkpoint.pt``'s file name,
    SHA-256 and size, and (``readme``) ``<folder>/README.md`` rendered from it; returns the card written."""
    folder = Path(folder)
    checkpoint = folder / CHECKPOINT_FILE
    if not checkpoint.is_file():
        raise FileNotFoundError(f"no checkpoint file at {checkpoint}")
    data = {"format": CARD_FORMAT, **dict(card)}
    data["checkpoint"] = {"file": CHECKPOINT_FILE, "sha256": file_sha256(checkpoint), "bytes": checkpoint.stat().st_size}
    missing = [key for key in CARD_FIELDS if key not in data]
    if missing:
        raise ValueError(f"card is missing {', '.join(missing)} (see pfzoo.zoo.CARD_FIELDS)")
    check_plain(data, "card")
    (folder / CARD_DATA_FILE).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    if readme:
        (folder / CARD_FILE).write_text(render_card(data).render())
    return data


def _measurement_row(label: str, m: Mapping[str, Any]) -> str:
    stderr, data_stderr, log_z = m.get("stderr"), m.get("data_stderr"), m.get("log_z")
    digits = 3 if stderr and stderr < 0.01 else 2
    value = "—" if m.get("value") is None else f"{m['value']:.{digits}f}" + (f" ± {stderr:.{digits}f}" if stderr else "")
    if log_z is not None:
        log_z_text = f"{log_z:.3f}" + (f" ± {m['log_z_stderr']:.3f}" if m.get("log_z_stderr") else "")
    else:
        log_z_text = "—"
    return (f"| {label} | {value} | {'—' if data_stderr is None else f'{data_stderr:.2f}'} | {m.get('num_test', '—')} | "
            f"{log_z_text} | {m.get('kind', '—')} |")


def _accuracy_section(measurements: Sequence[Mapping[str, Any]]) -> str:
    """The table of ``"metric": "test accuracy"`` measurements, then (once each) their data, settings and commands."""
    rows = ["| features | test accuracy | same classifier on the pixels | majority class | training / test examples |",
            "|---|---:|---:|---:|---|"]
    for m in measurements:
        mark = "" if m.get("converged", True) else " †"
        rows.append(f"| {m.get('layers_description', m['label'])} ({m['num_features']:,}) | {m['value']:.4f}{mark} | {m['pixels']:.4f} | "
                    f"{m['chance']:.4f} | {m['num_train']:,} / {m['num_test']:,} |")
    notes = _provenance(measurements)
    if not all(m.get("converged", True) for m in measurements):
        notes.insert(len(notes) - any(m.get("command") for m in measurements),
                     "† L-BFGS stopped at max_iter before converging (here or on the pixels).")
    return "\n".join(rows) + "\n\n" + "\n\n".join(notes)


def _provenance(measurements: Sequence[Mapping[str, Any]]) -> list[str]:
    """A section's closing notes, each text once: the measurements' data, their settings, and the commands that made them."""

    def once(texts):
        return list(dict.fromkeys(text for text in texts if text))

    notes = [f"Data: {data}" for data in once(m.get("data") for m in measurements)]
    notes += [f"Settings: `{settings}`." for settings in once(json.dumps(m.get("settings", {})) for m in measurements)]
    commands = once(m.get("command") for m in measurements)
    if commands:
        notes.append("Measured by " + "; ".join(map(command_markdown, commands)) + ".")
    return notes


ACCURACY_HEADING = "Linear classifier on hidden features"


RECOGNITION_HEADING = "Samples recognised as digits"


def _recognition_section(measurements: Sequence[Mapping[str, Any]]) -> str:
    """The table of ``"metric": "samples recognised"`` measurements, then (once each) their data, settings and commands."""
    rows = ["| images | recognised | mean top-class probability | classes' total variation from the test digits' |",
            "|---|---:|---:|---:|"]
    for m in measurements:
        rows.append(f"| {m['num_samples']:,} samples, {m['num_steps']:,} Gibbs sweeps from random states | {m['samples']:.3f} "
                    f"({m['ratio']:.2f} of the real rate) | {m['samples_confidence']:.3f} | {m['class_total_variation']:.3f} |")
    first = measurements[0]
    rows.append(f"| the {first['num_test']:,} real test digits | {first['real']:.3f} | {first['real_confidence']:.3f} | 0 |")
    if first.get("real_left_out") is not None:
        rows.append(f"| the {first['num_left_out']:,} training digits the classifier was not fitted on | {first['real_left_out']:.3f} | "
                    f"{first['real_left_out_confidence']:.3f} | — |")
    left_out = [f"Against the training digits the classifier was not fitted on (the population the model learned from) the "
                f"samples ({m['num_samples']:,}, {m['num_steps']:,} sweeps) are at {m['samples'] / m['real_left_out']:.2f} of their rate: "
                "the two real rates show how far the scale itself moves from one set of real digits to another."
                for m in measurements if m.get("real_left_out")]
    matched = [f"In the samples' own mix of classes ({m['num_samples']:,} samples, {m['num_steps']:,} sweeps) the real digits are "
               f"recognised at {m['class_matched_real']:.3f}: the samples at {m['class_matched_ratio']:.2f} of that (a model drawing "
               "mostly the easiest classes reads high against all the real digits, not against these)."
               for m in measurements if m.get("class_matched_real") is not None]
    burn_in = [burn_in_sentence(m) for m in measurements if m.get("curve")]
    pictures = [f"![The first samples beside real test digits, each panel with how many were recognised]({name})"
                for name in dict.fromkeys(m["picture"] for m in measurements if m.get("picture"))]
    notes = [*matched, *left_out, *burn_in, *pictures,
             f"Recognised: the classifier gives one class a probability of at least {first['threshold']:g}. The classifier is "
             f"fitted on the pixels of {first['num_train']:,} labelled training digits (its test accuracy "
             f"{first['pixels_accuracy']:.3f}) and never sees a sample; a model whose samples are digits has them recognised at "
             "about the real digits' rate and spread over the classes as they are (total variation near 0).",
             *_provenance(measurements)]
    return "\n".join(rows) + "\n\n" + "\n\n".join(notes)


def burn_in_sentence(measurement: Mapping[str, Any]) -> str:
    """A samples-recognised measurement's burn-in curve (``curve``, ``mixed``, ``warning``) in one paragraph."""
    curve = measurement["curve"]
    sweeps = " / ".join(f"{mark['sweeps']:,}" for mark in curve)
    shares = {start: " / ".join(f"{mark[start]:.3f}" for mark in curve) for start in ("from_random", "from_data")}
    verdict = ("the two starts agree at the end and the random start has levelled off: the samples are the model's"
               if measurement["mixed"] else f"**not mixed**: {measurement['warning']}")
    return (f"Burn-in: after {sweeps} sweeps the chains from random states are recognised at {shares['from_random']}, "
            f"as many chains from test digits at {shares['from_data']}; {verdict}.")


DEPTH_HEADING = "Depth: what the top layer contributes"


def _depth_section(depth: Mapping[str, Any]) -> str:
    """A DBM card's ``depth`` (:func:`pfzoo.studies.dbm_depth.depth_diagnostic`) as markdown."""
    full, short = depth["model"], depth["without_top"]
    rows = ["| | mean test log-likelihood (nats) | log Z |", "|---|---:|---:|",
            f"| the DBM | {full['value']:.2f} ± {full['stderr']:.2f} | {full['log_z']:.2f} |",
            f"| without its top layer (its average input folded into the bias below) | {short['value']:.2f} ± {short['stderr']:.2f} | "
            f"{short['log_z']:.2f} |"]
    return ("\n".join(rows) + f"\n\nThe top layer adds {depth['loss']:+.2f} ± {depth['loss_stderr']:.2f} nats per test digit; its share "
            f"of the posterior's activity (variance of the top-down input to the layer below against that plus the bottom-up "
            f"one, over the test digits) is {depth['top_layer_share']:.2g}. Estimator `{depth['estimator']}` with "
            f"`{json.dumps(depth['settings'])}` on {depth['num_test']:,} test digits ({depth['machine']}, {depth['date']}); "
            f"measured by {command_markdown(depth['command'])}."
            + "".join(f"\n\n**Warning ({label}):** {warning}" for label, run in (("the DBM", full), ("without its top layer", short))
                      for warning in run.get("warnings") or []))


def with_card_sections(readme: str, card: Mapping[str, Any]) -> str:
    """``readme`` (a card's markdown from any renderer) with the sections ``card`` owns set from it: the linear classifier's
    (:func:`with_accuracy_section`), the samples recognised as digits and a DBM's depth diagnostic (``card["depth"]``)."""
    readme = with_accuracy_section(readme, card)
    recognitions = [m for m in card.get("measurements") or [] if m.get("metric") == RECOGNITION_METRIC]
    readme = _with_section(readme, RECOGNITION_HEADING, _recognition_section(recognitions) if recognitions else "")
    return _with_section(readme, DEPTH_HEADING, _depth_section(card["depth"]) if card.get("depth") else "")


def with_accuracy_section(readme: str, card: Mapping[str, Any]) -> str:
    """``readme`` (a card's markdown from any renderer) with its ``## Linear classifier on hidden features`` section set
    to ``card``'s accuracy measurements: replaced where it is, else put before ``## Notes`` or at the end; removed
    when ``card`` has none. How a README that another script renders (e.g. ``scripts/reproduce_raise.py``) keeps it."""
    accuracies = [m for m in card.get("measurements") or [] if m.get("metric") == ACCURACY_METRIC]
    return _with_section(readme, ACCURACY_HEADING, _accuracy_section(accuracies) if accuracies else "")


def _with_section(readme: str, title: str, body: str) -> str:
    """``readme`` with its ``## title`` section's body set to ``body`` (removed when empty): replaced where it is, else put
    before ``## Notes`` or at the end."""
    section = f"## {title}\n\n{body}\n\n" if body else ""
    heading = f"\n## {title}\n"
    start = readme.find(heading)
    if start >= 0:
        end = readme.find("\n## ", start + len(heading))
        before, after = readme[:start + 1], "" if end < 0 else readme[end + 1:]
    else:
        notes = readme.find("\n## Notes\n")
        before, after = (readme, "") if notes < 0 else (readme[:notes + 1], readme[notes + 1:])
    text = before.rstrip("\n") + "\n\n" + section + after
    return text.rstrip("\n") + "\n"


CHECKOUT_SCRIPT = "python scripts/"
"""How a command of a script that only a checkout of the repository has begins (``scripts/`` is not installed)."""
CHECKOUT_NOTE = "in a checkout of the repository: scripts/ is not installed with the package"


def installed_command(command: str) -> str:
    """``command`` as it runs from an installed pfzoo, in any folder: ``python scripts/train.py ARGS`` (a checkout's
    script) becomes ``pfzoo train ARGS`` (the recipes ship inside the package); anything else is left as it is."""
    for script, task in (("python scripts/train.py", "train"), ("python scripts/evaluate.py", "evaluate")):
        if command == script or command.startswith(script + " "):
            return f"pfzoo {task}{command[len(script):]}"
    return command


def command_markdown(command: str) -> str:
    """``command`` as a card shows it: its installed form (:func:`installed_command`) in backticks, and for a script
    with no installed command (``python scripts/feature_card.py``, ...) a note that it runs in a checkout alone."""
    shown = installed_command(command)
    return f"`{shown}`" + (f" ({CHECKOUT_NOTE})" if shown.startswith(CHECKOUT_SCRIPT) else "")


def render_card(card: Mapping[str, Any]) -> ModelCard:
    """The markdown model card (``README.md``) of a zoo folder, from its ``card.json`` fields."""
    name = card["name"]
    recipe = card.get("recipe") or {}
    measured = card["log_likelihood"]
    facts = [
        ("model", f"`{card['family']}` (`conf/model/{card['model_config_name']}.yaml`), config `{json.dumps(card['model_config'])}`"),
        ("data", f"`dataset={card['dataset']}`, `{json.dumps(card['dataset_config'])}`"),
        ("data licence", card["data_licence"]),
    ]
    if recipe.get("experiment"):
        facts.append(("recipe", f"`conf/experiment/{recipe['experiment']}.yaml`"))
    if recipe.get("command"):
        facts.append(("training command", command_markdown(recipe["command"])))
    seconds = card.get("training_seconds")
    facts += [
        ("trained", f"{card.get('date') or 'unknown date'}, pfzoo {card.get('pfzoo_version') or '?'}, commit "
                    f"`{(card.get('git_commit') or 'unknown')[:12]}`" + (f", {seconds:.0f} s wall time" if seconds is not None else "")),
        ("file", f"`{card['checkpoint']['file']}` ({card['checkpoint']['bytes']:,} bytes, sha256 `{card['checkpoint']['sha256']}`)"),
        ("load", f"`pfzoo.zoo.pretrained({name!r})`; evaluate with `pfzoo evaluate pretrained={name}`, draw samples with "
                 f"`pfzoo sample pretrained={name}`"),
    ]
    rows = [_measurement_row(f"trained ({measured.get('estimator', '?')})", measured)]
    initial = card.get("log_likelihood_at_init")
    if initial:
        rows.append(_measurement_row(f"at initialisation ({initial.get('estimator', '?')})", initial))
    measurements = card.get("measurements") or []
    accuracies = [m for m in measurements if m.get("metric") == ACCURACY_METRIC]
    recognitions = [m for m in measurements if m.get("metric") == RECOGNITION_METRIC]
    rows += [_measurement_row(m.get("label", m.get("estimator", "?")), m) for m in measurements if m.get("metric") not in SECTION_METRICS]
    body = "\n".join(["| | mean test log-likelihood (nats) | test-set sampling stderr | test examples | log Z | kind |",
                      "|---|---:|---:|---:|---:|---|", *rows])
    settings = measured.get("settings")
    if settings:
        body += f"\n\nEstimator settings: `{json.dumps(settings)}`."
    body += "".join(f"\n\n**Warning:** {warning}" for warning in measured.get("warnings") or [])
    sections = [("Measured log-likelihood", body)]
    if accuracies:
        sections.append((ACCURACY_HEADING, _accuracy_section(accuracies)))
    if recognitions:
        sections.append((RECOGNITION_HEADING, _recognition_section(recognitions)))
    if card.get("depth"):
        sections.append((DEPTH_HEADING, _depth_section(card["depth"])))
    if card.get("notes"):
        sections.append(("Notes", "\n".join(f"- {note}" for note in card["notes"])))
    summary = card.get("summary") or ("Generated from `card.json` by `pfzoo.zoo.render_card`; the machine-readable card "
                                      "beside it holds the same facts and the full training config.")
    return ModelCard(title=card.get("title") or name, summary=summary, facts=facts, sections=sections)
