"""The results.json of ``scripts/reproduce_raise.py`` and the files made from it: how a run's measurements join what
other runs stored (:class:`RaiseRun`), ``table.md`` with its figures (:func:`write_table`), and the zoo folders
(checkpoint, README.md, card.json) exported with the measured numbers (:func:`export_model`). What goes into the table is
measured and rendered by :mod:`pfzoo.studies.raise_table`.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from pfzoo import zoo
from pfzoo.data import DataSplits
from pfzoo.studies.raise_figures import sweep_figure
from pfzoo.studies.raise_table import (
    FIGURES, SECTIONS, SWEEP_BASES, card_fields, comparable, hardware, heating_rows, label, measure, model_card, render_table, schedule_pilot,
    seeded, sweep_key, sweep_model, sweep_rows, training_record,
)
from pfzoo.studies.reporting import device_name, git_commit, load_average, machine_description
from pfzoo.zoo.cards import ACCURACY_METRIC, with_accuracy_section


def on_device(data: DataSplits, device: torch.device) -> DataSplits:
    """``data`` with its train, valid and test splits on ``device`` (where the models and the chains live)."""
    return dataclasses.replace(data, **{split: getattr(data, split).to(device) for split in ("train", "valid", "test")})


def repo_relative(path: Path, repo: Path) -> str:
    """``path`` relative to the repository ``repo`` when it lies inside it (results.json must not name local folders)."""
    resolved = path.resolve()
    return str(resolved.relative_to(repo) if resolved.is_relative_to(repo) else path)


@dataclass
class RaiseRun:
    """One run of ``scripts/reproduce_raise.py``: the ``results`` it adds to ``results_file`` (results.json), the run's
    measurement ``settings`` and ``seed``, and ``measured_on`` (date and hardware) for every entry it stores. Each
    ``measure_*`` method measures one model and stores its entry at once, so a run stopped early keeps what it measured.
    ``fresh``: start from an empty results.json rather than join the stored one (a smoke run's)."""

    results_file: Path
    results: dict
    seed: int
    measured_on: str
    fresh: bool

    @classmethod
    def start(cls, output: Path, settings: dict, *, seed: int, device: torch.device, fresh: bool) -> "RaiseRun":
        """A run writing ``<output>/results.json``, keeping the stored entries measured with the same settings on the same
        kind of device (unless ``fresh``)."""
        results_file = output / "results.json"
        previous = json.loads(results_file.read_text()) if results_file.is_file() and not fresh else {}
        results = {"machine": machine_description(), "gpu": device_name(device) if device.type == "cuda" else None, "settings": settings,
                   "seed": seed, "csl_stderr": "shared chains"}
        results |= {key: previous.get(key, {}) if comparable(previous, results) else {} for key in SECTIONS}
        return cls(results_file, results, seed, f"{datetime.date.today().isoformat()}, {hardware(results)}", fresh)

    @property
    def settings(self) -> dict:
        return self.results["settings"]

    def store(self, section: str, name: str, entry: dict) -> None:
        """Set ``results[section][name]`` and write results.json, keeping what another run (other models) wrote meanwhile
        unless ``fresh``. A sweep with the same settings as the stored one adds its K's rows to the stored rows
        (replacing those at the same K)."""
        latest = json.loads(self.results_file.read_text()) if self.results_file.is_file() and not self.fresh else {}
        if comparable(latest, self.results):
            self.results.update({key: {**latest.get(key, {}), **self.results[key]} for key in SECTIONS})
        stored = self.results[section].get(name)
        if section == "sweeps" and stored is not None and stored["settings"] == entry["settings"]:
            new_steps = {row["steps"] for row in entry["rows"]}
            entry = {**entry, "rows": sorted([row for row in stored["rows"] if row["steps"] not in new_steps] + entry["rows"], key=lambda row: row["steps"])}
        self.results[section][name] = entry
        self.results_file.write_text(json.dumps(self.results, indent=2) + "\n")

    def measure_model(self, name: str, model, data: DataSplits, checkpoint: Path, *, ais_chains: dict, only: list[str] | None,
                      kept: str, trained_on: str) -> None:
        """The table's estimates of model ``name`` (:func:`~pfzoo.studies.raise_table.measure`; ``only``: re-measure these
        cells and keep the stored others), stored with its config, ``kept`` (where its checkpoint stays) and its training
        time from the ``metrics.jsonl`` beside ``checkpoint`` (on the machine ``trained_on``), else the stored one."""
        estimates = measure(model, data, self.settings, seeded(model.device, self.seed), ais_chains=ais_chains, only=only)
        stored = self.results["models"].get(name, {})
        if only is not None:
            estimates = {**stored.get("estimates", {}), **estimates}
        # a training run's metrics.jsonl lies beside its checkpoint; a zoo folder's does not, so its earlier record stays
        training = training_record(checkpoint.parent, trained_on) or stored.get("training")
        self.store("models", name, {"checkpoint": kept, "config": model.config(), "estimates": estimates, "trained_on": self.measured_on,
                                    "load_average": load_average(), "training": training})

    def measure_sweep(self, name: str, model, data: DataSplits, num_steps: list[int], *, base: str, ais_chains: int, raise_examples: int) -> None:
        """AIS and RAISE against each K of ``num_steps`` from ``base`` (:func:`~pfzoo.studies.raise_table.sweep_rows`)."""
        s = {**self.settings, "sweep_ais_chains": ais_chains, "sweep_raise_examples": raise_examples}
        rows = sweep_rows(model, data, num_steps, s, base=base, seed=self.seed)
        self.store("sweeps", sweep_key(name, base), {"settings": s, "rows": rows, "measured_on": self.measured_on})

    def measure_pilot(self, name: str, model, data: DataSplits, schedules: list[str], pilot_settings: dict) -> None:
        """The schedule among ``schedules`` with the smallest |AIS − RAISE| on validation digits, then the test set with it
        (:func:`~pfzoo.studies.raise_table.schedule_pilot`; ``pilot_settings``: its ``pilot_examples`` and ``pilot_ais_chains``)."""
        s = {**self.settings, **pilot_settings}
        pilot = schedule_pilot(model, data, schedules, s, self.seed)
        self.store("schedule_pilots", name, {**pilot, "settings": s, "measured_on": self.measured_on})

    def measure_heating(self, name: str, model, data: DataSplits, heating_steps: list[int], *, examples: int) -> None:
        """RAISE with the mean-field proposal against the clamped heating chain (:func:`~pfzoo.studies.raise_table.heating_rows`)."""
        s = {"steps": self.settings["steps"], "raise_chains": self.settings["raise_chains"], "heating_examples": examples}
        rows = heating_rows(model, data, heating_steps, s, self.seed)
        self.store("heating", name, {"settings": s, "config": model.config(), "rows": rows, "measured_on": self.measured_on})


def write_table(results: dict, output: Path) -> Path:
    """Write ``<output>/table.md`` and every sweep's figure beside it (``figures/<key>-against-K.png``); returns the table's path."""
    output.mkdir(parents=True, exist_ok=True)
    (output / "table.md").write_text(render_table(results))
    for key, sweep in results.get("sweeps", {}).items():
        (name, base), settings = sweep_model(key), sweep["settings"]
        exact = results["models"].get(name, {}).get("estimates", {}).get("exact")
        sweep_figure(f"{label(name, results)}: AIS and RAISE against K ({SWEEP_BASES[base]})", sweep["rows"],
                     output / FIGURES / f"{key}-against-K.png",
                     exact=None if exact is None else exact["mean"],
                     note=f"AIS {settings['sweep_ais_chains']} chains; RAISE {settings['raise_chains']} chains × the same "
                          f"{settings['sweep_raise_examples']} test digits")
    return output / "table.md"


def export_model(name: str, results: dict, checkpoint: Path, folder: Path, *, repo: Path) -> None:
    """Put model ``name`` of ``checkpoint`` into zoo ``folder`` with its README.md and card.json. The linear-classifier
    section (``scripts/feature_card.py``) is kept only while the folder's checkpoint stays the same: a new model's
    features are not the old one's, so it is measured again. ``repo``: the checkout (its commit goes on a new card)."""
    model, config = zoo.load(checkpoint), zoo.load_checkpoint(checkpoint)["config"]
    same_model = checkpoint.resolve() == (folder / zoo.CHECKPOINT_FILE).resolve()
    data = folder / zoo.CARD_DATA_FILE
    previous = json.loads(data.read_text()) if data.is_file() and same_model else {}
    kept = [row for row in previous.get("measurements", []) if row.get("metric") == ACCURACY_METRIC]
    fields = card_fields(name, results, model, config, git_commit=previous.get("git_commit") if same_model else git_commit(repo), kept=kept)
    fields["notes"] = previous.get("notes") or fields["notes"]  # what was noted about this checkpoint still holds
    text = model_card(name, results, model, repo_relative(folder, repo)).render()
    zoo.export(checkpoint, folder, card=with_accuracy_section(text, fields), card_data=fields)
