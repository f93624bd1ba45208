"""The documentation site (issue 50): ``mkdocs build --strict`` of the repository's Markdown passes, and fails on a link
to a file that does not exist or an anchor that no heading makes (so CI's build can fail); the changelog is by release."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=root,
                          capture_output=True, text=True, timeout=120)


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    done = build(REPO, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    site = tmp_path / "site"
    assert (site / "index.html").is_file() and (site / "docs" / "cli" / "index.html").is_file()
    home = (site / "index.html").read_text()
    assert 'href="docs/cli/"' in home and 'href="models/rbm-digits/"' in home and 'href="conf/experiment/zoo_rbm.yaml"' in home
    assert (site / "conf" / "experiment" / "zoo_rbm.yaml").is_file()  # a linked non-page file is carried into the site


def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    (tmp_path / "docs").mkdir()
    shutil.copy(REPO / "docs" / "site_hooks.py", tmp_path / "docs")
    (tmp_path / "mkdocs.yml").write_text((REPO / "mkdocs.yml").read_text())
    (tmp_path / "docs" / "cli.md").write_text("# Command line\n\nBack to the [README](../README.md#install).\n")
    for page in set(re.findall(r"docs/([\w-]+)\.md", (REPO / "mkdocs.yml").read_text())) - {"cli"}:  # the navigation's pages
        (tmp_path / "docs" / f"{page}.md").write_text(f"# {page}\n")
    (tmp_path / "DESIGN.md").write_text("# Design\n")
    (tmp_path / "CHANGELOG.md").write_text("# Changelog\n")
    (tmp_path / "README.md").write_text("# pfzoo\n\n## Install\n\nSee [the command line](docs/cli.md).\n")
    assert build(tmp_path, tmp_path / "ok").returncode == 0
    (tmp_path / "README.md").write_text("# pfzoo\n\n## Install\n\nSee [the command line](docs/cli.md) and [the guide](docs/missing.md).\n")
    done = build(tmp_path, tmp_path / "missing")
    assert done.returncode != 0 and "docs/missing.md" in done.stderr
    (tmp_path / "README.md").write_text("# pfzoo\n\n## Setup\n\nSee [the command line](docs/cli.md).\n")
    done = build(tmp_path, tmp_path / "anchor")
    assert done.returncode != 0 and "#install" in done.stderr


def test_the_changelog_is_by_release_and_its_newest_release_is_the_package_version():
    import pfzoo

    releases = re.findall(r"^## (\S+)(?: — (\d{4}-\d{2}-\d{2}))?$", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert releases[0] == ("Unreleased", ""), releases[:2]
    version, date = releases[1]
    assert version == pfzoo.__version__ and date, releases[:2]
