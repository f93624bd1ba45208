"""Every script in examples/ runs at its toy size (``--toy``) and prints what it promises, its estimates near the exact
values it prints beside them. Run in this process (``main(["--toy"])``) to spare each a fresh interpreter."""

import re
import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NUMBER = r"([-+]?\d+\.\d+)"


def run_example(name, capsys, *args):
    main = runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="example")["main"]
    assert main(["--toy", *args]) in (None, 0)
    return capsys.readouterr().out


def test_every_example_is_tested_here():
    source = Path(__file__).read_text()
    assert sorted(path.stem for path in EXAMPLES.glob("*.py")) == sorted(re.findall(r'run_example\("(\w+)"', source))


def test_own_energy(capsys):
    out = run_example("own_energy", capsys)
    for line in ("quartic over R^4", "network over {0,1}^12"):
        estimate, stderr, exact = map(float, re.search(re.escape(line) + rf".*log Z = {NUMBER} ± {NUMBER}, exact {NUMBER}", out).groups())
        assert abs(estimate - exact) < 4 * stderr + 0.05, out


@pytest.mark.slow
def test_compare_models(capsys):
    out = run_example("compare_models", capsys)
    difference, stderr, exact = map(float, re.search(rf"test digits: {NUMBER} ± {NUMBER} .* exact {NUMBER}", out).groups())
    assert abs(difference - exact) < 4 * stderr + 0.05 and "better: DBM" in out, out


def test_rbm_features(capsys):
    out = run_example("rbm_features", capsys, "--hidden", "50")
    pixels, features = (float(value) for value in re.findall(r"test accuracy (\d\.\d+)", out))
    assert pixels > 0.85 and 0.3 < features <= 1.0, out  # two epochs of CD-1: features that already beat chance (0.1)


def test_hais_poe(capsys):
    out = run_example("hais_poe", capsys)
    ica = re.search(rf"ica-patches .*HAIS log Z {NUMBER} ± {NUMBER}.*exact log Z {NUMBER}", out)
    estimate, stderr, exact = map(float, ica.groups())
    assert abs(estimate - exact) < 4 * stderr + 0.05, out
    assert re.search(r"poe_laplace-patches \(ProductOfExperts, 72 experts\): HAIS log Z .*its card \(hais", out), out


def test_train_dbm(capsys, tmp_path):
    out = run_example("train_dbm", capsys, "--run-dir", str(tmp_path))
    assert re.search(r"test log-likelihood\s+= -\d+\.\d+; exact", out) and "trained DBM with layers [64, 20, 10]" in out, out
    assert (tmp_path / "checkpoint.pt").is_file() and (tmp_path / "metrics.jsonl").is_file()
    pictures = re.search(r"pictures: (.*)", out).group(1).split(", ")  # the report's pictures are still there afterwards
    assert pictures and all(Path(picture).is_file() for picture in pictures), pictures
