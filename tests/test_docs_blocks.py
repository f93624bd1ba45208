"""Every Python block of docs/ runs as written (issue 50: "every code block in README and docs runs"), each in a fresh
namespace from an empty folder; the README's one block, the quick start, runs in tests/test_readme.py. A few seconds of
CPU each (the user guide's AIS block ten), so the slow ones are marked."""

import re
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
BLOCKS = [(page.name, number, code) for page in sorted((REPO / "docs").glob("*.md"))
          for number, code in enumerate(re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M), 1)]


def test_the_docs_have_python_blocks():
    assert {page for page, _, _ in BLOCKS} >= {"training.md", "estimates.md", "zoo.md"}


@pytest.mark.slow
@pytest.mark.parametrize("page, number, code", BLOCKS, ids=[f"{page}:{number}" for page, number, _ in BLOCKS])
def test_docs_block_runs_as_written(page, number, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # blocks write run folders (runs/rbm) where they are run
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        exec(compile(code, f"{page} block {number}", "exec"), {"__name__": "__main__"})
    finally:
        torch.set_num_threads(threads)
