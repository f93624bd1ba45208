"""Render reports/README.md, the index of the seeds' experiments, from reports/seed_index.yaml and the reports' JSON.

    python scripts/seed_index.py            # write reports/README.md
    python scripts/seed_index.py --check    # exit 1 when the committed index differs from a fresh render

Every number of ours in the index is read from committed JSON through the registry's pointers
(pfzoo/studies/seed_index.py says how); a pointer that no longer resolves is a one-line error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pfzoo.studies.seed_index import render_index

REPOSITORY = Path(__file__).resolve().parents[1]
INDEX = "reports/README.md"
REGISTRY = "reports/seed_index.yaml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed index instead of writing it")
    parser.add_argument("--root", type=Path, default=REPOSITORY, help="the repository root (default: this checkout)")
    args = parser.parse_args(argv)
    try:
        text = render_index(args.root, args.root / REGISTRY, INDEX)
    except (KeyError, ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    index = args.root / INDEX
    if args.check:
        if not index.exists() or index.read_text() != text:
            print(f"{INDEX} differs from a fresh render of {REGISTRY} and the reports' JSON; "
                  f"run python scripts/seed_index.py", file=sys.stderr)
            return 1
        return 0
    index.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
