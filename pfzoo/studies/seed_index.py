"""The index of the seeds' experiments: ``reports/README.md``, rendered from a registry and the reports' JSON.

The registry (``reports/seed_index.yaml``) lists every numbered table and figure of the five seed documents (and, for the
slides and *Deep Learning* ch. 18, which number few or none, the experiments by slide title or section), each with the
seed's own number as quoted text, the setting differences, a status and a link. Our numbers are never written in the
registry: each is a *reading*, a pointer into a committed JSON file (a report's ``results.json`` or an estimator card's),
and the renderer formats what the pointer finds. A test renders the index again and compares it with the committed file,
so the index cannot drift from the JSON.

Pointers are ``path/to/file.json#/key/key/...`` (JSON pointer syntax: ``~1`` stands for ``/`` and ``~0`` for ``~`` in a
key; a number indexes a list). A segment ``[name=value,other=value]`` picks the one element of a list whose fields print
as those values, so a pointer names rows by what they are rather than by their position. An item's ``json`` names its
default file, and a pointer that starts with ``#`` reads that file. Texts (setting differences, causes) may quote a JSON
value inline as ``{#/pointer|format}`` or ``{file.json#/pointer|format}``, so that settings of ours are read, not typed.

Nothing here prints; :func:`render_index` returns the markdown and the script writes it.
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

STATUS_LABELS = {
    "reproduced": "reproduced",
    "other settings": "reproduced at other settings",
    "not reproduced": "not reproduced",
    "no cause yet": "not reproduced",
    "not possible": "not possible here",
    "not attempted": "not attempted",
}
"""Registry status keys → the words the index shows. ``not reproduced`` needs the measured cause as ``why``;
``no cause yet`` says that no cause has been measured (its ``why`` may say what was seen); ``not possible`` and
``not attempted`` need the reason as ``why``."""

STATUS_NEEDS_WHY = frozenset({"not reproduced", "not possible", "not attempted"})

SUMMARY_COLUMNS = (
    ("reproduced", ("reproduced",)),
    ("at other settings", ("other settings",)),
    ("not reproduced", ("not reproduced", "no cause yet")),
    ("not possible here", ("not possible",)),
    ("not attempted", ("not attempted",)),
)

ITEM_KEYS = frozenset({"seed", "item", "row", "numbered", "what", "seed_says", "json", "ours", "picture", "gap", "differences",
                       "status", "why", "link", "ablation", "same_as"})

NUMBERED_ID = re.compile(r"\b(Table|Figure|Fig\.?)\s*(\d+(?:\.\d+)?)", re.IGNORECASE)
INLINE_READING = re.compile(r"\{([^{}#|]*)#([^{}|]*)(?:\|([^{}]*))?\}")


@dataclass(frozen=True)
class Reading:
    """One number of ours: ``label`` shown before it, the JSON ``source`` file (relative to the repository root) and the
    ``pointer`` into it, a Python format ``spec`` (or ``bool`` for yes/no), and an optional pointer to its stderr. A
    reading without a pointer is its label alone, which then quotes its numbers inline (``"{#/holds|d} of {#/total|d}"``).
    """

    label: str
    source: str
    pointer: str | None
    spec: str = ".2f"
    stderr_pointer: str | None = None


@dataclass(frozen=True)
class SeedItem:
    """One row of the index: a numbered table or figure of a seed (``numbered``), or an experiment the seed names by a
    slide title or section heading (``item`` is then that title, as the seed writes it); ``row`` splits a table whose
    rows have separate verdicts."""

    seed: str
    item: str
    what: str
    seed_says: str
    status: str
    numbered: bool = True
    row: str = ""
    why: str = ""
    differences: str = ""
    link: str = ""
    ablation: str = ""
    readings: tuple[Reading, ...] = ()
    picture: str = ""
    gap: str = ""
    default_source: str = ""

    @property
    def name(self) -> str:
        """``Table 1``, or ``Table 1 — mnistCD1-20`` for a row of it."""
        return f"{self.item} — {self.row}" if self.row else self.item


@dataclass(frozen=True)
class Seed:
    """A seed document: its key (``000``), file name under the seeds folder, and a short title."""

    key: str
    file: str
    title: str


@dataclass
class Registry:
    """The seeds and the items of ``reports/seed_index.yaml``, in the order the index shows them."""

    seeds: dict[str, Seed]
    items: list[SeedItem] = field(default_factory=list)


def load_registry(path: str | os.PathLike) -> Registry:
    """Read the registry file. An entry with ``same_as: "<seed> <item>"`` copies that entry's fields (for the thesis's
    chapter 5, which repeats the HAIS report) and overrides those it names itself."""
    raw = yaml.safe_load(Path(path).read_text())
    seeds = {str(key): Seed(str(key), entry["file"], entry["title"]) for key, entry in raw["seeds"].items()}
    by_name: dict[str, dict] = {}
    items = []
    for entry in raw["items"]:
        entry = dict(entry)
        unknown = set(entry) - ITEM_KEYS
        if unknown:
            raise ValueError(f"registry item {entry.get('seed')} {entry.get('item')!r} has unknown keys {sorted(unknown)}")
        if "same_as" in entry:
            if entry["same_as"] not in by_name:
                raise ValueError(f"registry item {entry.get('item')!r}: same_as {entry['same_as']!r} names no earlier item")
            base = copy.deepcopy(by_name[entry.pop("same_as")])
            base.update(entry)
            entry = base
        entry["seed"] = str(entry["seed"])
        by_name[f"{entry['seed']} {entry['item']}" + (f" — {entry['row']}" if entry.get("row") else "")] = entry
        items.append(_item(entry))
    for item in items:
        if item.seed not in seeds:
            raise ValueError(f"registry item {item.name!r} names seed {item.seed!r}, which the registry's seeds lack")
        if item.status not in STATUS_LABELS:
            raise ValueError(f"registry item {item.seed} {item.name!r}: status {item.status!r} is not one of {sorted(STATUS_LABELS)}")
        if item.status in STATUS_NEEDS_WHY and not item.why:
            raise ValueError(f"registry item {item.seed} {item.name!r}: status {item.status!r} needs a 'why'")
    return Registry(seeds, items)


def _item(entry: Mapping[str, Any]) -> SeedItem:
    default = entry.get("json", "")
    readings = tuple(_reading(reading, default) for reading in entry.get("ours", ()))
    fields = {key: entry[key] for key in ("row", "why", "differences", "link", "ablation", "picture", "gap", "numbered") if key in entry}
    return SeedItem(seed=entry["seed"], item=entry["item"], what=entry["what"], seed_says=entry["seed_says"],
                    status=entry["status"], readings=readings, default_source=default, **fields)


def _reading(entry: Mapping[str, Any], default_source: str) -> Reading:
    label = entry.get("label", "")
    if "at" not in entry:
        if not INLINE_READING.search(label):
            raise ValueError(f"reading {label!r} has no pointer ('at') and quotes no JSON value inline")
        return Reading(label, default_source, None)
    source, pointer = _split_address(entry["at"], default_source)
    stderr_pointer = _split_address(entry["pm"], source)[1] if "pm" in entry else None
    return Reading(label, source, pointer, str(entry.get("fmt", ".2f")), stderr_pointer)


def _split_address(address: str, default_source: str) -> tuple[str, str]:
    source, _, pointer = address.partition("#")
    source = source or default_source
    if not source:
        raise ValueError(f"pointer {address!r} names no JSON file and its item has no default 'json'")
    return source, pointer


def resolve(document: Any, pointer: str) -> Any:
    """The value at ``pointer`` in a parsed JSON ``document``: ``/a/b/0`` walks keys and list indices; a segment
    ``[k=v,...]`` picks the single list element whose fields ``k`` print as ``v``. Raises ``KeyError`` naming the segment
    that does not resolve."""
    value = document
    walked = ""
    for raw_segment in pointer.split("/")[1:] if pointer else ():
        segment = raw_segment.replace("~1", "/").replace("~0", "~")
        walked += "/" + raw_segment
        if segment.startswith("[") and segment.endswith("]"):
            value = _select(value, segment[1:-1], walked)
        elif isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        elif isinstance(value, dict) and segment in value:
            value = value[segment]
        else:
            raise KeyError(f"{walked!r} does not resolve")
    return value


def _select(value: Any, condition: str, walked: str) -> Any:
    if not isinstance(value, list):
        raise KeyError(f"{walked!r}: a selector needs a list, found {type(value).__name__}")
    wanted = dict(part.split("=", 1) for part in condition.split(","))
    matches = [element for element in value if isinstance(element, dict)
               and all(key in element and _printed(element[key]) == text for key, text in wanted.items())]
    if len(matches) != 1:
        raise KeyError(f"{walked!r} matches {len(matches)} elements, not one")
    return matches[0]


def _printed(value: Any) -> str:
    return json.dumps(value) if isinstance(value, bool) or value is None else str(value)


class JsonFiles:
    """The committed JSON files under ``root``, each parsed once."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self._documents: dict[str, Any] = {}

    def value(self, source: str, pointer: str) -> Any:
        """The value at ``pointer`` in ``root / source``; ``KeyError`` names the file and the segment that fails."""
        if source not in self._documents:
            self._documents[source] = json.loads((self.root / source).read_text())
        try:
            return resolve(self._documents[source], pointer)
        except KeyError as error:
            raise KeyError(f"{source}#{pointer}: {error.args[0]}") from None


def format_value(value: Any, spec: str) -> str:
    """A JSON value as the index shows it: ``spec`` is a Python format spec (``.2f``, ``+.3f``, ``,d``, ``.2e``) or
    ``bool`` (yes/no); None (a measurement that did not finish, e.g. not within a step cap) shows as "—"."""
    if value is None:
        return "—"
    if spec == "bool" or isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if spec.endswith("d") and isinstance(value, float) and value.is_integer():
        value = int(value)
    return format(value, spec)


def reading_text(files: JsonFiles, reading: Reading) -> str:
    """``label value`` or ``label value ± stderr``, the value read through the reading's pointer (the label may quote
    JSON values inline, as texts do)."""
    label = expand_inline(files, reading.label, reading.source)
    if reading.pointer is None:
        return label
    text = format_value(files.value(reading.source, reading.pointer), reading.spec)
    if reading.stderr_pointer is not None:
        text += " ± " + format_value(files.value(reading.source, reading.stderr_pointer), reading.spec.lstrip("+"))
    return f"{label} {text}".strip()


def expand_inline(files: JsonFiles, text: str, default_source: str) -> str:
    """``text`` with every ``{file#/pointer|spec}`` (or ``{#/pointer|spec}`` on the item's default file) replaced by the
    formatted value it points at."""

    def replace(match: re.Match) -> str:
        source = match.group(1) or default_source
        return format_value(files.value(source, match.group(2)), match.group(3) or ".2f")

    return INLINE_READING.sub(replace, text)


def referenced_files(registry: Registry) -> set[str]:
    """Every JSON file (relative to the repository root) that the registry's readings and inline quotes read."""
    files = set()
    for item in registry.items:
        quoting = [(item.differences, item.default_source), (item.why, item.default_source)]
        quoting += [(reading.label, reading.source) for reading in item.readings]
        files.update(reading.source for reading in item.readings)
        for text, default in quoting:
            files.update(match.group(1) or default for match in INLINE_READING.finditer(text))
    return files


def numbered_ids(text: str) -> set[str]:
    """Every table and figure a seed's text names, as ``Table N`` / ``Figure N`` (``Fig. 3.6`` and ``figure 3.6`` count as
    ``Figure 3.6``)."""
    found = set()
    for kind, number in NUMBERED_ID.findall(text):
        found.add(("Table" if kind.lower() == "table" else "Figure") + " " + number)
    return found


def status_text(files: JsonFiles, item: SeedItem, index_folder: str) -> str:
    """The status cell: the status's words, its cause or reason in brackets, a note when a number is missing from the
    JSON, and a link to the ablation if any."""
    label = STATUS_LABELS[item.status]
    why = expand_inline(files, item.why, item.default_source)
    if item.status == "no cause yet":
        label += " (no measured cause yet" + (f": {why})" if why else ")")
    elif item.status == "not reproduced":
        label += f" (cause: {why})"
    elif why:
        label += f" ({why})"
    if item.gap:
        label += "; a number it needs is not in the JSON yet (see Gaps)"
    if item.ablation:
        label += f"; ablation: {_markdown_link(item.ablation, index_folder)}"
    return label


def ours_text(files: JsonFiles, item: SeedItem, index_folder: str) -> str:
    """The "ours" cell: every reading, then the picture (for a figure whose result is an image), then the gap (what the
    JSON does not hold yet)."""
    parts = [reading_text(files, reading) for reading in item.readings]
    if item.picture:
        parts.append("picture: " + _markdown_link(item.picture, index_folder))
    if item.gap:
        parts.append(f"not in the JSON yet: {item.gap}")
    return "; ".join(parts) if parts else "—"


def _markdown_link(target: str, index_folder: str) -> str:
    """``[name](relative path)`` from the index's folder to ``target`` (a path from the repository root, maybe with an
    ``#anchor``)."""
    path, _, anchor = target.partition("#")
    relative = os.path.relpath(path, index_folder).replace(os.sep, "/")
    name = path.rstrip("/").removesuffix("/README.md").removesuffix("README.md").rstrip("/") or path
    return f"[{name}]({relative}{'#' + anchor if anchor else ''})"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|") or "—"


def summary_rows(registry: Registry) -> list[list[str]]:
    """Per seed (and in all): the number of items and how many have each status."""
    rows = []
    totals = [0] * (len(SUMMARY_COLUMNS) + 1)
    for key, seed in registry.seeds.items():
        items = [item for item in registry.items if item.seed == key]
        counts = [len(items)] + [sum(item.status in statuses for item in items) for _, statuses in SUMMARY_COLUMNS]
        totals = [a + b for a, b in zip(totals, counts)]
        rows.append([f"{key} {seed.title}"] + [str(count) for count in counts])
    rows.append(["all"] + [str(count) for count in totals])
    return rows


def render_index(root: str | os.PathLike, registry_path: str | os.PathLike, index_path: str = "reports/README.md") -> str:
    """The markdown of the index: a summary of statuses per seed, one table per seed (item | what | seed's number | ours
    | setting differences | status | link), and the gaps. ``root`` is the repository root; ``index_path`` (relative to
    it) is where the index will live, for its relative links. Raises ``KeyError`` when a pointer does not resolve."""
    registry = load_registry(registry_path)
    files = JsonFiles(root)
    folder = os.path.dirname(index_path) or "."
    registry_name = os.path.relpath(Path(registry_path).resolve(), Path(root).resolve()).replace(os.sep, "/")
    lines = [
        "# The seeds' experiments: an index",
        "",
        f"Every numbered table and figure of the five seed documents (`../shared/seeds/`), and the experiments of the "
        f"slides and of *Deep Learning* ch. 18 by slide title or section, with the seed's number beside ours, the "
        f"settings that differ, a status and a link to the report. Generated by `python scripts/seed_index.py` from "
        f"`{registry_name}` and the committed JSON of the reports and estimator cards: every number in the *ours* "
        f"column is read from that JSON through a pointer in the registry, never typed. `tests/test_seed_index.py` "
        f"fails when this file and the JSON disagree, when a pointer no longer resolves, or when a numbered table or "
        f"figure of a seed is missing here. Do not edit by hand: change the registry or the reports and regenerate.",
        "",
        "Statuses: *reproduced* — the seed's claim holds at its settings; *reproduced at other settings* — it holds, at "
        "the settings the differences column names; *not reproduced* — it does not hold, with the measured cause, or "
        "saying that none is measured yet; *not possible here* — with the reason; *not attempted* — with the reason "
        "(an illustration has no measurement to repeat).",
        "",
        "## Summary",
        "",
        "| seed | items | " + " | ".join(name for name, _ in SUMMARY_COLUMNS) + " |",
        "|---|" + "---:|" * (len(SUMMARY_COLUMNS) + 1),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in summary_rows(registry)]
    for key, seed in registry.seeds.items():
        lines += ["", f"## {key} {seed.title}", "",
                  "| item | what | seed's number | ours | setting differences | status | link |",
                  "|---|---|---|---|---|---|---|"]
        for item in (item for item in registry.items if item.seed == key):
            name = item.name if item.numbered else f"*{item.name}*"
            cells = [name, item.what, item.seed_says, ours_text(files, item, folder),
                     expand_inline(files, item.differences, item.default_source), status_text(files, item, folder),
                     _markdown_link(item.link, folder) if item.link else "—"]
            lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    gaps = [item for item in registry.items if item.gap]
    lines += ["", "## Gaps: numbers not in the JSON yet", ""]
    lines += [f"- {item.seed} {item.name}: {item.gap}" for item in gaps] or ["None."]
    lines += ["", "Items in *italics* are not numbered in their seed: the slide title or section that names them."]
    return "\n".join(lines) + "\n"
