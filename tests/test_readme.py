"""The README as a user meets it: its two opening commands are the ones CI runs, its quick start runs as written from
another folder, and its zoo table is the one ``scripts/zoo_table.py`` generates from the cards today."""

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def section(heading):
    """The README's text from ``heading`` to the next ``## `` heading."""
    start = README.index(f"\n{heading}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end >= 0 else None]


def test_readme_opens_with_exactly_two_commands_and_ci_runs_the_second():
    first_block = re.match(r"```bash\n(.*?)\n```", README, re.S)
    assert first_block, "the README must open with a bash block"
    install, test = first_block.group(1).splitlines()
    assert "pip install" in install and "scripts/train.py" in install
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert test in ci and any(line.replace(" --quiet", "") in install for line in ci if "pip install" in line)


@pytest.mark.slow  # a fresh interpreter: about 10 s of CPU
def test_quick_start_runs_as_written_from_another_folder(tmp_path):
    code = re.search(r"```python\n(.*?)\n```", section("## Quick start (library)"), re.S).group(1)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    ais, stderr, exact = map(float, re.search(r"AIS (-\d+\.\d+) ± (\d+\.\d+), exact (-\d+\.\d+) nats", result.stdout).groups())
    assert abs(ais - exact) < 4 * stderr + 0.05
    trained = float(re.search(r"PCD-1, 30 epochs: (-\d+\.\d+) nats", result.stdout).group(1))
    assert trained > -23.0  # the untrained RBM (base rates, weights ≈ 0) is at -24.6
    quoted = re.search(r"It prints `AIS (-\d+\.\d+) ± \d+\.\d+, exact (-\d+\.\d+) nats` and `PCD-1, 30 epochs: (-\d+\.\d+) nats`", README)
    assert quoted, "the README quotes what the quick start prints"
    # another CPU's float rounding may flip a sampled bit and move the trained value a little: a tenth of a nat allows for it
    assert [abs(float(q) - p) < 0.1 for q, p in zip(quoted.groups(), (ais, exact, trained))] == [True] * 3, (quoted.groups(), result.stdout)


def test_zoo_table_is_generated_from_the_cards():
    zoo_table = runpy.run_path(str(REPO / "scripts" / "zoo_table.py"), run_name="zoo_table")
    from pfzoo.zoo import list_pretrained_weights

    table = zoo_table["render"](list_pretrained_weights(zoo_dir=REPO / "models"))
    assert zoo_table["replace_table"](README, table) == README, "run python scripts/zoo_table.py --write README.md"
    names = [entry.name for entry in list_pretrained_weights(zoo_dir=REPO / "models")]
    assert all(f"[`{name}`](models/{name}/README.md)" in section("## The zoo") for name in names)
    assert "| [`rbm-digits`](models/rbm-digits/README.md) | `RBM` | `digits` | −19.02 | exact | 360 | [`zoo_rbm`]" in table
