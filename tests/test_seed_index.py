"""reports/README.md, the index of the seeds' experiments, against its registry, the committed JSON and the seeds' text.

The index is generated (``python scripts/seed_index.py``); these tests fail when it and the JSON disagree, when a pointer
of the registry no longer resolves, when a link or anchor is broken, or when a numbered table or figure of a seed is
missing from the registry (the seeds' text is scanned for "Table N" / "Figure N" / "Fig. N").
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from script_modules import load_script

from pfzoo.studies import seed_index
from pfzoo.studies.ising_report import twice_floor_times
from pfzoo.studies.model_comparison.row_recorder import total_stderr

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / "reports" / "seed_index.yaml"
INDEX = ROOT / "reports" / "README.md"

# The known failures: their status must say "not reproduced" unless a report shows otherwise.
KNOWN_FAILURES = {("000", "Table 1"), ("003", "Table 3.1"), ("003", "Table 5.1"), ("004", "Table 1 — mnistCD1-500")}


@pytest.fixture(scope="module")
def registry() -> seed_index.Registry:
    return seed_index.load_registry(REGISTRY)


@pytest.fixture(scope="module")
def seeds_folder() -> Path:
    """The seed documents: ``$PFZOO_SEEDS``, else ``<repo>/../shared/seeds`` (beside the checkout, as the data are)."""
    env = os.environ.get("PFZOO_SEEDS")
    folder = Path(env) if env else ROOT.parent / "shared" / "seeds"
    if not folder.is_dir():
        pytest.skip(f"the seed documents' folder {folder} is absent; set PFZOO_SEEDS to check the index against them")
    return folder


def test_every_pointer_resolves_to_a_json_value(registry):
    files = seed_index.JsonFiles(ROOT)
    count = 0
    for item in registry.items:
        for reading in item.readings:
            pointers = [reading.pointer, reading.stderr_pointer]
            for pointer in (pointer for pointer in pointers if pointer is not None):
                value = files.value(reading.source, pointer)
                assert value is None or isinstance(value, (int, float, str)), f"{item.seed} {item.name}: {pointer} is a {type(value).__name__}"
                count += 1
            seed_index.expand_inline(files, reading.label, reading.source)
        seed_index.expand_inline(files, item.differences, item.default_source)
        seed_index.expand_inline(files, item.why, item.default_source)
    assert count > 100


def test_the_derived_numbers_the_registry_reads_are_their_reports_functions_of_the_stored_parts(registry):
    """Numbers a report's README derives and its results.json stores for the index: a model-comparison row's ± (Table 1,
    ``evaluation/stderr``: :func:`total_stderr` of its two parts) and Figure 3.2's seconds to twice the ε_corr floor
    (``twice_floor``: :func:`twice_floor_times` of the stored traces). Each registry pointer to one must read the
    function's value on the same JSON, so a hand edit or a changed formula without a re-render fails here."""
    files = seed_index.JsonFiles(ROOT)
    checked = set()
    for item in registry.items:
        for reading in item.readings:
            for pointer in (reading.pointer, reading.stderr_pointer):
                if pointer and pointer.endswith("/evaluation/stderr") and reading.source.startswith("reports/models/"):
                    evaluation = files.value(reading.source, pointer.removesuffix("/stderr"))
                    assert evaluation["stderr"] == total_stderr(evaluation), f"{item.seed} {item.name}: {pointer}"
                    checked.add("stderr")
                elif pointer and pointer.startswith("/twice_floor/"):
                    stored = files.value(reading.source, pointer)
                    assert stored == seed_index.resolve(twice_floor_times(files.value(reading.source, "")), pointer.removeprefix("/twice_floor"))
                    checked.add("twice_floor")
    assert checked == {"stderr", "twice_floor"}, "the registry no longer reads the derived numbers this test checks"


def test_the_committed_index_is_a_fresh_render():
    fresh = seed_index.render_index(ROOT, REGISTRY, "reports/README.md")
    assert INDEX.read_text() == fresh, "reports/README.md differs from the registry and the JSON: run python scripts/seed_index.py"


def test_the_script_writes_the_index_and_checks_it(tmp_path, registry):
    script = load_script(ROOT / "scripts" / "seed_index.py")
    assert script.main(["--check"]) == 0
    copy = tmp_path / "repository"
    for relative in ["reports/seed_index.yaml", *sorted(seed_index.referenced_files(registry))]:
        (copy / relative).parent.mkdir(parents=True, exist_ok=True)
        (copy / relative).write_bytes((ROOT / relative).read_bytes())
    (copy / "reports" / "README.md").write_text(INDEX.read_text() + "an edit by hand\n")
    assert script.main(["--check", "--root", str(copy)]) == 1
    assert script.main(["--root", str(copy)]) == 0
    assert (copy / "reports" / "README.md").read_text() == INDEX.read_text()
    assert script.main(["--check", "--root", str(copy)]) == 0
    (copy / "estimators" / "raise" / "results.json").write_text("{}")
    assert script.main(["--check", "--root", str(copy)]) == 2  # a pointer that no longer resolves: a one-line error


def test_every_numbered_table_and_figure_of_every_seed_is_listed(registry, seeds_folder):
    for key, seed in registry.seeds.items():
        text = (seeds_folder / seed.file).read_text()
        named = seed_index.numbered_ids(text)
        listed = {item.item for item in registry.items if item.seed == key and item.numbered}
        assert not named - listed, f"seed {key} names {sorted(named - listed)}, which the registry does not list"
        assert not listed - named, f"the registry lists {sorted(listed - named)} for seed {key}, which its text never names"
        for item in (item for item in registry.items if item.seed == key and not item.numbered):
            assert item.item in text, f"seed {key} has no slide title or section {item.item!r}"
        assert any(item.seed == key for item in registry.items), f"seed {key} has no item"


def test_the_scan_finds_every_spelling_of_an_id():
    text = "as Fig. 3.6 shows; see Fig 3.10, figure 18.1 and Table 2 (Figures 2 and 3 name no id)"
    assert seed_index.numbered_ids(text) == {"Figure 3.6", "Figure 3.10", "Figure 18.1", "Table 2"}


def test_statuses_are_honest_about_the_known_failures(registry):
    for item in registry.items:
        if (item.seed, item.name) in KNOWN_FAILURES:
            assert item.status in ("not reproduced", "no cause yet"), f"{item.seed} {item.name} is a known failure"
        if item.status in ("reproduced", "other settings"):
            assert item.readings or item.picture, f"{item.seed} {item.name} is marked {item.status} with nothing of ours"
    assert {(item.seed, item.name) for item in registry.items} >= KNOWN_FAILURES


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_every_link_and_anchor_resolves(registry):
    for item in registry.items:
        for target in (item.link, item.ablation, item.picture):
            if not target:
                continue
            path, _, anchor = target.partition("#")
            assert (ROOT / path).exists(), f"{item.seed} {item.name}: {path} does not exist"
            if anchor:
                assert anchor in _anchors((ROOT / path).read_text()), f"{item.seed} {item.name}: {path} has no #{anchor}"


def test_a_selector_picks_one_row_and_says_when_it_cannot():
    document = {"runs": [{"model": "a", "steps": 100, "value": 1.5}, {"model": "a", "steps": 1000, "value": 2.5}],
                "odd/key": {"x": True}}
    assert seed_index.resolve(document, "/runs/[model=a,steps=1000]/value") == 2.5
    assert seed_index.resolve(document, "/runs/0/steps") == 100
    assert seed_index.resolve(document, "/odd~1key/x") is True
    with pytest.raises(KeyError, match="matches 2 elements"):
        seed_index.resolve(document, "/runs/[model=a]/value")
    with pytest.raises(KeyError, match="does not resolve"):
        seed_index.resolve(document, "/runs/[model=a,steps=100]/missing")


def test_values_are_formatted_as_the_index_shows_them():
    assert seed_index.format_value(-51.61394, ".2f") == "-51.61"
    assert seed_index.format_value(5242881, ",d") == "5,242,881"
    assert seed_index.format_value(7.0, "d") == "7"
    assert seed_index.format_value(None, ".2f") == "—"
    assert seed_index.format_value(True, ".2f") == "yes"


def test_a_reading_without_a_pointer_must_quote_json(tmp_path):
    registry = tmp_path / "registry.yaml"
    registry.write_text('seeds: {"000": {file: x.txt, title: t}}\n'
                        'items: [{seed: "000", item: Table 1, what: w, seed_says: s, status: reproduced,\n'
                        '         json: r.json, ours: [{label: "seven of eight"}]}]\n')
    with pytest.raises(ValueError, match="quotes no JSON value"):
        seed_index.load_registry(registry)
