"""The documentation site's one mkdocs hook (``mkdocs.yml``: ``hooks: [docs/site_hooks.py]``).

The site is the repository's own Markdown at its repository paths: ``README.md`` (the home page), ``DESIGN.md``,
``CHANGELOG.md``, the pages of ``docs/`` and the zoo's model cards ``models/<name>/README.md``, plus every other
repository file one of them links to (a recipe's YAML, the licence, a card's pictures), copied as it is. So the links
that work when the repository is browsed (``docs/cli.md`` from the README, ``../README.md`` from a docs page) are the
links that work on the site, and ``mkdocs build --strict`` fails on any link to a file that does not exist, whichever
way the page is read. mkdocs cannot take the repository root itself as its ``docs_dir`` (it holds ``mkdocs.yml``), hence
this hook in place of ``docs_dir``'s own listing.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "DESIGN.md", "CHANGELOG.md", "docs/*.md", "models/*/README.md")
"""The Markdown the site renders, as globs under the repository root."""
LINK = re.compile(r"\]\(\s*<?([^)\s#>]+)>?(?:#[^)]*)?\)")
"""The target of a Markdown link or image, ``[text](target#anchor)``, without its anchor."""


def linked_files(page: Path) -> set[Path]:
    """The repository files ``page`` links to by a relative path (web addresses and missing files left to mkdocs)."""
    targets = set()
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("mailto:"):
            continue
        resolved = (page.parent / target).resolve()
        if resolved.is_file() and resolved.is_relative_to(REPO):
            targets.add(resolved)
    return targets


def on_files(files: Files, config) -> Files:
    """Replace ``docs_dir``'s listing by the pages of :data:`PAGES` and the files they link to, at their repository paths."""
    pages = {path for pattern in PAGES for path in REPO.glob(pattern)}
    chosen = pages | {target for page in pages for target in linked_files(page)}
    return Files([File(path.relative_to(REPO).as_posix(), src_dir=str(REPO), dest_dir=config.site_dir,
                       use_directory_urls=config.use_directory_urls) for path in sorted(chosen)])
