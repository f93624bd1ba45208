"""``pfzoo zoo`` / ``list`` and ``pfzoo sample``, "did you mean" for misspelt keys, options and commands, the completion
of zoo names, and failed runs leaving no folder behind (issue 50, item 5)."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pfzoo import app, cli, zoo
from pfzoo.app.zoo_listing import zoo_listing

REPO = Path(__file__).resolve().parents[1]


def test_zoo_lists_every_model_with_its_numbers_and_filters_by_family_and_data():
    table = zoo_listing([])
    for entry in zoo.list_pretrained_weights():
        row = next(line for line in table.splitlines() if line.startswith(entry.name + " "))
        assert entry.family in row and entry.dataset in row and f"{entry.num_parameters:,}" in row, row
    assert "rbm-digits *" in table and "poe_student-patches *" in table and "poe_laplace-patches *" not in table
    assert zoo_listing(["--family", "rbm", "--data", "digits", "--names"]) == "rbm-digits"
    assert zoo_listing(["--data", "patches", "--names"]).splitlines() == [e.name for e in zoo.list_pretrained_weights() if e.dataset == "patches"]
    with pytest.raises(ValueError, match="--family=rbn has no weights in the zoo; did you mean rbm?"):
        zoo_listing(["--family", "rbn"])
    with pytest.raises(ValueError, match=r"pfzoo zoo: unrecognized arguments: --nosuch"):
        zoo_listing(["--nosuch"])


def test_every_command_the_help_lists_is_accepted_and_list_is_zoo(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    listed = [line.split()[0] for line in capsys.readouterr().out.split("commands:")[1].splitlines() if line.startswith("  ")]
    assert listed == list(cli.COMMANDS)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["list", "--names"])
    assert exit_.value.code == 0 and capsys.readouterr().out.split() == zoo.list_pretrained()
    for command in ("train", "evaluate", "sample", "zoo"):
        with pytest.raises(SystemExit) as exit_:
            cli.main([command, "--help"])
        assert exit_.value.code == 0, command
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        cli.main(["evalute"])
    assert exit_.value.code == cli.EXIT_USAGE and "unknown command 'evalute'; did you mean evaluate?" in capsys.readouterr().err


def test_sample_draws_seeded_samples_into_a_tensor_file_and_a_grid(tmp_path):
    reports = []

    def draw(name, *overrides):
        reports.append(app.format_sampling(app.sample(cli.compose("sample", [f"run_dir={tmp_path / name}", *overrides]))))
        return torch.load(tmp_path / name / "samples.pt")

    first = draw("a", "pretrained=rbm-digits", "num_samples=6", "seed=1")
    assert first.shape == (6, 64) and set(first.unique().tolist()) <= {0.0, 1.0} and (tmp_path / "a" / "samples.png").is_file()
    assert torch.equal(draw("b", "pretrained=rbm-digits", "num_samples=6", "seed=1"), first)
    assert not torch.equal(draw("c", "pretrained=rbm-digits", "num_samples=6", "seed=2"), first)
    from_file = draw("f", f"checkpoint={zoo.pretrained_path('rbm-digits')}", "num_samples=6", "seed=1")  # the run's data config names the image shape
    assert torch.equal(from_file, first) and (tmp_path / "f" / "samples.png").is_file()
    whitened = draw("d", "pretrained=ica-patches", "num_samples=5")  # whitened components: no picture, and it says why
    assert whitened.shape == (5, 36) and not (tmp_path / "d" / "samples.png").exists()
    assert "no picture: the model's data are not images" in reports[-1] and "picture: " in reports[0]
    with pytest.raises(ValueError, match="pass pretrained=NAME .* or checkpoint=PATH"):
        app.sample(cli.compose("sample", [f"run_dir={tmp_path / 'e'}"]))


@pytest.mark.parametrize("task, overrides, hint", [
    ("evaluate", ["model.num_hiden=5"], "did you mean model.num_hidden=5?"),
    ("evaluate", ["model=rbmm"], "did you mean model=rbm?"),
    ("train", ["model=dbm", "model.hidden_size=[8]"], "did you mean model.hidden_sizes=[8]?"),
    ("train", ["num_tset=5"], "did you mean final_num_test=5?"),
    ("evaluate", ["estimator=raise", "estimator.num_exmples=5"], "did you mean estimator.num_examples=5?"),
    ("train", ["tranier=cd"], "did you mean trainer=cd?"),
    ("train", ["traner.epochs=5"], "did you mean trainer.epochs=5?"),
])
def test_a_misspelt_key_or_option_gets_a_one_line_suggestion(task, overrides, hint):
    with pytest.raises(ValueError) as error:
        cli.compose(task, overrides)
    message = cli.one_line(error.value)
    assert message.endswith(hint) and "\n" not in str(error.value)


def test_a_key_near_a_config_group_gets_no_hint_naming_an_option_it_lacks():
    """pfzoo-train has no pretrained=; "did you mean trainer=rbm-digits?" would name a trainer that does not exist."""
    with pytest.raises(cli.USER_ERRORS) as error:
        cli.compose("train", ["pretrained=rbm-digits"])
    assert "did you mean" not in cli.one_line(error.value) and "pretrained" in cli.one_line(error.value)


def test_shell_completion_offers_zoo_names_after_pretrained_and_versus(monkeypatch, capsys):
    for line, expected in (("pfzoo-evaluate pretrained=rbm-d", ["pretrained=rbm-digits"]),
                           ("pfzoo-evaluate estimator=raise versus=dbm-",
                            ["versus=dbm-binarized_mnist", "versus=dbm-binarized_mnist-500-500-1000", "versus=dbm-digits"])):
        monkeypatch.setenv("COMP_LINE", line)
        with pytest.raises(SystemExit) as exit_:
            cli.run("evaluate", ["-sc", "query=bash"])
        assert exit_.value.code == 0 and capsys.readouterr().out.split() == expected
    monkeypatch.setenv("COMP_LINE", "pfzoo-train pretrained=rbm-d")  # train takes no zoo name: Hydra answers (nothing to offer)
    with pytest.raises(SystemExit) as exit_:
        cli.run("train", ["-sc", "query=bash"])
    assert "rbm-digits" not in capsys.readouterr().out


def test_a_failed_command_leaves_no_run_folder_holding_only_its_log(tmp_path):
    run_dir = tmp_path / "failed"
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "evaluate.py"), "pretrained=rbm-digitz", f"run_dir={run_dir}"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == cli.EXIT_USAGE and "did you mean rbm-digits?" in done.stderr
    assert not run_dir.exists()
