"""The results.json of ``scripts/reproduce_raise.py`` and the files made from it: how a run's measurements join what
other runs stored (:class:`RaiseRun`; a sweep point made in sittings waits in ``sweep_parts/`` beside it until its last
AIS part comes, :meth:`RaiseRun.measure_sweep_part`), ``table.md`` with its figures (:func:`write_table`), and the zoo folders
(checkpoint, README.md, card.json) exported with the measured numbers (:func:`export_model`). What goes into the table is
measured and rendered by :mod:`pfzoo.studies.raise_table`.

Every entry records the checkpoint its model was loaded from (:func:`checkpoint_record`: the path and its SHA-256), and
:func:`write_table` refuses to render an entry whose checkpoint differs from the file its model now loads
(:func:`check_checkpoints`), unless the entry says it was measured on an older one (:data:`~pfzoo.studies.raise_table.OLDER`).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from pfzoo import zoo
from pfzoo.data import DataSplits
from pfzoo.estimators.base import BoundKind, PartitionEstimate
from pfzoo.estimators.sharding import check_part
from pfzoo.studies.bracket_sweep import bracket_point_in_parts, estimator_options
from pfzoo.studies.raise_figures import sweep_figure
from pfzoo.studies.raise_table import (
    FIGURES, MODELS, OLDER, SECTIONS, SWEEP_BASES, card_fields, comparable, hardware, heating_rows, label, measure, model_card, render_table,
    point_row, schedule_pilot, seeded, sweep_key, sweep_model, sweep_rows, zoo_folder,
)
from pfzoo.studies.training_time import training_record
from pfzoo.studies.reporting import device_name, git_commit, load_average, machine_description
from pfzoo.zoo.cards import SAMPLES_PICTURE, SECTION_METRICS, with_card_sections


def on_device(data: DataSplits, device: torch.device) -> DataSplits:
    """``data`` with its train, valid and test splits on ``device`` (where the models and the chains live)."""
    return dataclasses.replace(data, **{split: getattr(data, split).to(device) for split in ("train", "valid", "test")})


def repo_relative(path: Path, repo: Path) -> str:
    """``path`` relative to the repository ``repo`` when it lies inside it (results.json must not name local folders)."""
    resolved = path.resolve()
    return str(resolved.relative_to(repo.resolve()) if resolved.is_relative_to(repo.resolve()) else path)


def checkpoint_record(path: Path, repo: Path) -> dict:
    """What an entry measured on the model loaded from ``path`` records: ``checkpoint`` (``path`` relative to ``repo`` where
    it lies inside) and ``checkpoint_sha256`` (the file's SHA-256, as the zoo's cards record it)."""
    return {"checkpoint": repo_relative(path, repo), "checkpoint_sha256": zoo.file_sha256(path)}


def check_checkpoints(results: dict, repo: Path) -> None:
    """Refuse, with a one-line ``ValueError`` naming the entry and both hashes, to render an entry of ``results`` whose
    recorded ``checkpoint_sha256`` is not the SHA-256 of the file its ``checkpoint`` names now (relative to ``repo``): its
    numbers belong to another model. An entry that records no hash is refused too, unless it is marked
    :data:`~pfzoo.studies.raise_table.OLDER` (measured on an older checkpoint, which the table names beside it). Entries of
    models the table does not show (no longer in :data:`~pfzoo.studies.raise_table.MODELS`) are not rendered, so not checked."""
    for section in SECTIONS:
        for key, entry in results.get(section, {}).items():
            if (sweep_model(key)[0] if section == "sweeps" else key) not in MODELS or entry.get(OLDER):
                continue
            recorded, path = entry.get("checkpoint_sha256"), entry.get("checkpoint")
            if recorded is None or path is None:
                raise ValueError(f"{section} row {key!r} records no checkpoint sha256: measure it again, or mark it {OLDER!r} with the "
                                 "checkpoint it was measured on")
            found = zoo.file_sha256(repo / path) if (repo / path).is_file() else "none (the file is missing)"
            if found != recorded:
                raise ValueError(f"{section} row {key!r} was measured on checkpoint sha256 {recorded}, but {path} now has sha256 {found}: "
                                 f"measure the row again, or mark it {OLDER!r} with the checkpoint it was measured on")


@dataclass
class RaiseRun:
    """One run of ``scripts/reproduce_raise.py``: the ``results`` it adds to ``results_file`` (results.json), the run's
    measurement ``settings`` and ``seed``, and ``measured_on`` (date and hardware) for every entry it stores. Each
    ``measure_*`` method measures one model and stores its entry at once, so a run stopped early keeps what it measured,
    with the checkpoint its model was loaded from (:func:`checkpoint_record`, paths relative to the checkout ``repo``).
    ``fresh``: start from an empty results.json rather than join the stored one (a smoke run's). ``exported``: the
    checkpoints this run copied into a zoo folder (:meth:`export`), by SHA-256, with the copy's record."""

    results_file: Path
    results: dict
    seed: int
    measured_on: str
    fresh: bool
    repo: Path
    exported: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def start(cls, output: Path, settings: dict, *, seed: int, device: torch.device, fresh: bool, repo: Path) -> "RaiseRun":
        """A run writing ``<output>/results.json``, keeping the stored entries (unless ``fresh``, which starts the file
        afresh). Refused in one line when the stored entries were measured with other settings or on another kind of
        device: this run's first entry would replace the file, and every stored row with it."""
        results_file = output / "results.json"
        previous = json.loads(results_file.read_text()) if results_file.is_file() and not fresh else {}
        results = {"machine": machine_description(), "gpu": device_name(device) if device.type == "cuda" else None, "settings": settings,
                   "seed": seed, "csl_stderr": "shared chains"}
        if any(previous.get(key) for key in SECTIONS) and not comparable(previous, results):
            changed = sorted(key for key in {**previous.get("settings", {}), **settings} if previous.get("settings", {}).get(key) != settings.get(key))
            where = f"settings {', '.join(changed)}" if changed else f"device ({previous.get('gpu') or 'cpu'} against {results['gpu'] or 'cpu'})"
            raise ValueError(f"{results_file} holds rows measured with other {where} than this run's: they would be lost at this "
                             f"run's first row; write this run's table elsewhere (--output DIR)")
        results |= {key: previous.get(key, {}) for key in SECTIONS}
        return cls(results_file, results, seed, f"{datetime.date.today().isoformat()}, {hardware(results)}", fresh, repo)

    @property
    def settings(self) -> dict:
        return self.results["settings"]

    def store(self, section: str, name: str, entry: dict) -> None:
        """Set ``results[section][name]`` and write results.json, keeping what another run wrote meanwhile unless
        ``fresh``: the file's entries win over the copies this run read at its start (another run may have re-measured
        them since), only ``results[section][name]`` is this run's. A sweep with the same settings as the stored one,
        measured on the same checkpoint, adds its K's rows to the stored rows (replacing those at the same K); each row
        then records its own ``measured_on``."""
        latest = json.loads(self.results_file.read_text()) if self.results_file.is_file() and not self.fresh else {}
        if comparable(latest, self.results):
            self.results.update({key: {**self.results[key], **latest.get(key, {})} for key in SECTIONS})
        stored = self.results[section].get(name)
        if (section == "sweeps" and stored is not None and stored["settings"] == entry["settings"]
                and stored.get("checkpoint_sha256") == entry["checkpoint_sha256"] and not stored.get(OLDER)):
            # rows of two sittings: each keeps the day and machine it was measured on, and the stored rows their evidence
            new_steps = {row["steps"] for row in entry["rows"]}
            kept = [{"measured_on": stored.get("measured_on"), **row} for row in stored["rows"] if row["steps"] not in new_steps]
            rows = kept + [{"measured_on": entry.get("measured_on"), **row} for row in entry["rows"]]
            evidence = {"checkpoint_evidence": stored["checkpoint_evidence"]} if kept and "checkpoint_evidence" in stored else {}
            entry = {**entry, **evidence, "rows": sorted(rows, key=lambda row: row["steps"])}
        self.results[section][name] = entry
        self.results_file.write_text(json.dumps(self.results, indent=2) + "\n")

    def checkpoint_of(self, path: Path) -> dict:
        """The :func:`checkpoint_record` of ``path``, or of its zoo copy where this run exported it (:meth:`export`)."""
        record = checkpoint_record(path, self.repo)
        return self.exported.get(record["checkpoint_sha256"], record)

    def export(self, name: str, checkpoint: Path, folder: Path) -> None:
        """Copy model ``name`` of ``checkpoint`` into zoo ``folder`` with its card (:func:`export_model`); this run's entries
        measured on ``checkpoint``, and those it measures on it later, then record the copy, which holds the same parameters
        (checked here: the copy is rewritten with a portable config, so its bytes and SHA-256 differ)."""
        source = self.checkpoint_of(checkpoint)
        export_model(name, self.results, checkpoint, folder, repo=self.repo)
        copy = checkpoint_record(folder / zoo.CHECKPOINT_FILE, self.repo)
        ours, theirs = zoo.load(checkpoint).state_dict(), zoo.load(folder / zoo.CHECKPOINT_FILE).state_dict()
        if ours.keys() != theirs.keys() or not all(torch.equal(ours[key], theirs[key]) for key in ours):
            raise ValueError(f"the zoo copy {copy['checkpoint']} of {source['checkpoint']} holds other parameters")
        self.exported[source["checkpoint_sha256"]] = copy
        moved = [(section, key, entry) for section in SECTIONS for key, entry in self.results[section].items()
                 if entry.get("checkpoint_sha256") == source["checkpoint_sha256"]]
        for section, key, entry in moved if source != copy else ():
            self.store(section, key, {**entry, **copy})

    def measure_model(self, name: str, model, data: DataSplits, checkpoint: Path, *, ais_chains: dict, only: list[str] | None,
                      trained_on: str) -> None:
        """The table's estimates of model ``name`` (:func:`~pfzoo.studies.raise_table.measure`; ``only``: re-measure these
        cells and keep the stored others), stored with its config, its ``checkpoint``'s record and its training time from
        the ``metrics.jsonl`` beside ``checkpoint`` (on the machine ``trained_on``), else the stored one. ``only`` refuses
        when the stored cells were measured on another checkpoint: one row holds one model's numbers."""
        stored, record = self.results["models"].get(name, {}), self.checkpoint_of(checkpoint)
        if only is not None and stored.get("estimates") and (stored.get("checkpoint_sha256") != record["checkpoint_sha256"] or stored.get(OLDER)):
            raise ValueError(f"only={only} would keep {name}'s stored cells, measured on checkpoint sha256 {stored.get('checkpoint_sha256')}, "
                             f"beside cells of {record['checkpoint']} (sha256 {record['checkpoint_sha256']}): measure every cell")
        estimates = measure(model, data, self.settings, seeded(model.device, self.seed), ais_chains=ais_chains, only=only)
        if only is not None:
            estimates = {**stored.get("estimates", {}), **estimates}
        # a training run's metrics.jsonl lies beside its checkpoint; a zoo folder's does not, so its earlier record stays
        training = training_record(checkpoint.parent, trained_on, zoo.load_checkpoint(checkpoint)["config"]) or stored.get("training")
        self.store("models", name, {**record, "config": model.config(), "estimates": estimates,
                                    "trained_on": self.measured_on, "load_average": load_average(), "training": training})

    def measure_sweep(self, name: str, model, checkpoint: Path, data: DataSplits, num_steps: list[int], *, base: str, ais_chains: int,
                      raise_examples: int, part: tuple[int, int] | None = None) -> list[str]:
        """AIS and RAISE against each K of ``num_steps`` from ``base`` (:func:`~pfzoo.studies.raise_table.sweep_rows`), or
        with ``part = (i, n)`` part i of each point's AIS chains (:meth:`measure_sweep_part`). Returns a line per K saying
        what was stored."""
        if part is not None:
            completed = self.measure_sweep_part(name, model, checkpoint, data, num_steps, base=base, ais_chains=ais_chains,
                                                raise_examples=raise_examples, part=part)
            return [f"K = {k:,}: " + ("every part in: the row is stored" if k in completed else
                                      f"part {part[0]} of {part[1]} stored in {parts_file(self.results_file.parent, name, base, k)}") for k in num_steps]
        s = {**self.settings, "sweep_ais_chains": ais_chains, "sweep_raise_examples": raise_examples}
        rows = sweep_rows(model, data, num_steps, s, base=base, seed=self.seed)
        self.store("sweeps", sweep_key(name, base), {"settings": s, "rows": rows, "measured_on": self.measured_on, **self.checkpoint_of(checkpoint)})
        return [f"K = {k:,}: the row is stored" for k in num_steps]

    def measure_sweep_part(self, name: str, model, checkpoint: Path, data: DataSplits, num_steps: list[int], *, base: str, ais_chains: int,
                           raise_examples: int, part: tuple[int, int]) -> list[int]:
        """Part ``part = (i, n)`` of the AIS chains of :meth:`measure_sweep`'s point at each K of ``num_steps``
        (:func:`sweep_point_in_parts`), for a sweep too long for one sitting. Each part's log
        weights wait in ``<output>/sweep_parts/<key>-K<K>.json`` (:func:`parts_file`; commit it between sessions); the
        sitting that brings the last of the n parts pools them, runs the log-likelihood and RAISE, stores the row into
        the sweep as :meth:`measure_sweep` would (its ``seconds`` the sum of the sittings', its ``parts`` when and where
        each ran) and removes the file. Sittings may run side by side (one per core): each reads the file again when its
        chains have run, so the one that finds all n parts there pools. Returns the K's whose rows were completed.
        Refused in one line, before running, when the file holds parts of another run (other settings, checkpoint or n)
        or part i already."""
        s = {**self.settings, "sweep_ais_chains": ais_chains, "sweep_raise_examples": raise_examples}
        record, completed = self.checkpoint_of(checkpoint), []
        header = {"model": name, "base": base, "settings": s, "count": part[1], "checkpoint_sha256": record["checkpoint_sha256"]}
        stored = {k: self.stored_parts(name, base, k, header, part[0]) for k in num_steps}  # every K checked before any runs
        for k in num_steps:
            began = time.perf_counter()

            def done_by_now(k=k) -> list[PartitionEstimate]:
                # read again once this part has run: sittings running beside this one may have stored theirs meanwhile
                stored[k] = self.stored_parts(name, base, k, header, part[0])
                return [part_estimate(entry, model.device) for entry in stored[k]["parts"].values()]

            estimate, row = sweep_point_in_parts(model, data, k, s, base=base, seed=self.seed, part=part, done=done_by_now)
            entry = {"seconds": round(time.perf_counter() - began, 1), "measured_on": self.measured_on, **part_record(estimate)}
            path = parts_file(self.results_file.parent, name, base, k)
            if row is None:
                stored[k]["parts"][str(part[0])] = entry
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps({**header, "num_steps": k, "checkpoint": record["checkpoint"], "parts": stored[k]["parts"]}) + "\n")
                continue
            sittings = {**stored[k]["parts"], str(part[0]): entry}
            row["seconds"] = round(sum(sitting["seconds"] for sitting in sittings.values()), 1)
            row["parts"] = [{"index": int(index), "seconds": sitting["seconds"], "measured_on": sitting["measured_on"]}
                            for index, sitting in sorted(sittings.items(), key=lambda item: int(item[0]))]
            self.store("sweeps", sweep_key(name, base), {"settings": s, "rows": [row], "measured_on": self.measured_on, **record})
            path.unlink(missing_ok=True)
            completed.append(k)
        return completed

    def stored_parts(self, name: str, base: str, num_steps: int, header: dict, index: int) -> dict:
        """The parts file of ``name``'s point at K = ``num_steps`` from ``base`` (``{"parts": {}}`` when there is none),
        refused in one line when it belongs to another run than ``header`` describes or holds part ``index`` already."""
        path = parts_file(self.results_file.parent, name, base, num_steps)
        if not path.is_file():
            return {"parts": {}}
        stored = json.loads(path.read_text())
        differing = [key for key in header if stored.get(key) != header[key]]
        if differing:
            raise ValueError(f"{path} holds parts of another run (its {', '.join(differing)} differ from this run's): finish that run "
                             f"with its settings, or delete the file to start this one")
        if str(index) in stored["parts"]:
            raise ValueError(f"{path} holds part {index} of {header['count']} already (measured {stored['parts'][str(index)]['measured_on']}); "
                             f"run one of the parts it lacks: {sorted(set(range(header['count'])) - {int(i) for i in stored['parts']})}")
        return stored

    def measure_pilot(self, name: str, model, checkpoint: Path, data: DataSplits, schedules: list[str], pilot_settings: dict) -> None:
        """The schedule among ``schedules`` with the smallest |AIS − RAISE| on validation digits, then the test set with it
        (:func:`~pfzoo.studies.raise_table.schedule_pilot`; ``pilot_settings``: its ``pilot_examples`` and ``pilot_ais_chains``)."""
        s = {**self.settings, **pilot_settings}
        pilot = schedule_pilot(model, data, schedules, s, self.seed)
        self.store("schedule_pilots", name, {**pilot, "settings": s, "measured_on": self.measured_on, **self.checkpoint_of(checkpoint)})

    def measure_heating(self, name: str, model, checkpoint: Path, data: DataSplits, heating_steps: list[int], *, examples: int) -> None:
        """RAISE with the mean-field proposal against the clamped heating chain (:func:`~pfzoo.studies.raise_table.heating_rows`)."""
        s = {"steps": self.settings["steps"], "raise_chains": self.settings["raise_chains"], "heating_examples": examples}
        rows = heating_rows(model, data, heating_steps, s, self.seed)
        self.store("heating", name, {"settings": s, "config": model.config(), "rows": rows, "measured_on": self.measured_on,
                                     **self.checkpoint_of(checkpoint)})


def sweep_point_in_parts(model, data, num_steps: int, s: dict, *, base: str, seed: int, part: tuple[int, int],
                         done) -> tuple[PartitionEstimate, dict | None]:
    """:func:`~pfzoo.studies.raise_table.sweep_rows`'s row at K = ``num_steps`` made in sittings (:func:`~pfzoo.studies.bracket_sweep.bracket_point_in_parts`):
    this sitting's AIS part ``part = (i, n)`` of the log Ẑ chains, and the row once ``done`` (earlier sittings' parts)
    and it make all n; the row is the one :func:`~pfzoo.studies.raise_table.sweep_rows` gives in one go, but for its ``seconds``."""
    estimate, point = bracket_point_in_parts(
        model, data.test, num_steps=num_steps, part=part, done=done, ais_chains=s["sweep_ais_chains"], raise_chains=s["raise_chains"],
        raise_examples=s["sweep_raise_examples"], posterior_samples=s["posterior_samples"], base=base,
        base_data=data.train if base == "base_rate" else None, generator=seeded(model.device, seed + 1),
        raise_generator=seeded(model.device, seed + 2), **estimator_options(s))
    return estimate, None if point is None else point_row(point)


PARTS = "sweep_parts"  # beside results.json: the parts of sweep points made in sittings, until the last comes


def check_sweep_part(part: tuple[int, int] | None, num_steps: list[int] | None, ais_chains: int) -> None:
    """Refuse in one line a sweep ``part`` (``(i, n)`` or ``None``) without the K's of its points, or with more parts than
    blocks of ``ais_chains`` chains (:func:`pfzoo.estimators.sharding.check_part`)."""
    if part is not None and not num_steps:
        raise ValueError("a part splits the points of a sweep: give their K (--sweep-steps)")
    check_part(part, ais_chains)


def part_of(text: str) -> tuple[int, int]:
    """An argparse type: ``I/N`` (``0 ≤ I < N``) as ``(I, N)``, part I of parts 0…N−1 (:meth:`RaiseRun.measure_sweep_part`)."""
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise argparse.ArgumentTypeError(f"expected I/N with 0 ≤ I < N (part I of parts 0…N−1), got {text!r}")
    return int(index), int(count)


def parts_file(output: Path, name: str, base: str, num_steps: int) -> Path:
    """Where :meth:`RaiseRun.measure_sweep_part` keeps the finished parts of ``name``'s sweep point at K = ``num_steps``."""
    return output / PARTS / f"{sweep_key(name, base)}-K{num_steps}.json"


def part_record(estimate: PartitionEstimate) -> dict:
    """An AIS part's estimate as JSON (float64 log weights as Python floats, which JSON writes and reads back exactly)."""
    return {"log_z": estimate.log_z, "stderr": estimate.stderr, "ess": estimate.ess, "log_weights": estimate.log_weights.double().cpu().tolist(),
            "info": estimate.info, "warnings": list(estimate.warnings)}


def part_estimate(record: dict, device: torch.device) -> PartitionEstimate:
    """The estimate :func:`part_record` stored, its log weights on ``device``."""
    return PartitionEstimate(log_z=record["log_z"], stderr=record["stderr"], ess=record["ess"], kind=BoundKind.UNBIASED_Z, info=record["info"],
                             log_weights=torch.tensor(record["log_weights"], dtype=torch.float64, device=device), warnings=tuple(record["warnings"]))


def write_table_and_cards(results: dict, output: Path, zoo_dir: Path | None, *, repo: Path) -> Path:
    """:func:`write_table`, and with ``zoo_dir`` each model's card in its folder there (:func:`export_model`; the
    checkpoints already there stay); returns the table's path."""
    table = write_table(results, output, repo=repo)
    for name in results["models"] if zoo_dir is not None else ():
        folder = zoo_folder(name, zoo_dir)
        export_model(name, results, folder / zoo.CHECKPOINT_FILE, folder, repo=repo)
    return table


def write_table(results: dict, output: Path, *, repo: Path) -> Path:
    """Write ``<output>/table.md`` and every sweep's figure beside it (``figures/<key>-against-K.png``); returns the table's
    path. Refuses first (:func:`check_checkpoints`, entries' paths relative to the checkout ``repo``) when an entry's
    checkpoint is not the one its model now loads."""
    check_checkpoints(results, repo)
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


def same_parameters(checkpoint: Path, held: Path) -> bool:
    """Whether the zoo file ``held`` exists and holds the model of ``checkpoint``: the same family, configuration and
    parameters, bit for bit (a training checkpoint carries a trainer state its exported copy drops, so the files differ)."""
    if not held.is_file():
        return False
    a, b = zoo.load_checkpoint(checkpoint), zoo.load_checkpoint(held)
    if (a["model"], a["model_config"]) != (b["model"], b["model_config"]) or a["state_dict"].keys() != b["state_dict"].keys():
        return False
    return all(torch.equal(a["state_dict"][key], b["state_dict"][key]) for key in a["state_dict"])


def export_model(name: str, results: dict, checkpoint: Path, folder: Path, *, repo: Path) -> None:
    """Put model ``name`` of ``checkpoint`` into zoo ``folder`` with its README.md and card.json. The linear-classifier
    section (``scripts/feature_card.py``), the samples recognised (``scripts/sample_card.py``) and a DBM's depth
    diagnostic (``scripts/dbm_depth.py``) are kept only while the folder holds the same model (:func:`same_model`: a
    copy exported from another folder, or the training run's checkpoint of the same parameters, is the same model): a
    new model is measured again. ``repo``: the checkout (its commit goes on a new card)."""
    model, config = zoo.load(checkpoint), zoo.load_checkpoint(checkpoint)["config"]
    same_model = same_parameters(checkpoint, folder / zoo.CHECKPOINT_FILE)
    data = folder / zoo.CARD_DATA_FILE
    previous = json.loads(data.read_text()) if data.is_file() and same_model else {}
    kept = [row for row in previous.get("measurements", []) if row.get("metric") in SECTION_METRICS]
    if not same_model:  # another model's samples
        (folder / SAMPLES_PICTURE).unlink(missing_ok=True)
    fields = card_fields(name, results, model, config, git_commit=previous.get("git_commit") if same_model else git_commit(repo), kept=kept)
    fields["notes"] = previous.get("notes") or fields["notes"]  # what was noted about this checkpoint still holds
    fields["pfzoo_version"] = previous.get("pfzoo_version") or fields["pfzoo_version"]  # the version that trained it, as git_commit
    if previous.get("depth"):  # the depth diagnostic (scripts/dbm_depth.py) measured this checkpoint
        fields["depth"] = previous["depth"]
    text = model_card(name, results, model, repo_relative(folder, repo)).render()
    zoo.export(checkpoint, folder, card=with_card_sections(text, fields), card_data=fields)
