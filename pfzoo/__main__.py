"""``python -m pfzoo {train,evaluate} [key=value ...]``: the same command lines as ``pfzoo-train`` / ``pfzoo-evaluate``."""

import sys

from pfzoo.cli import EXIT_USAGE, TASKS, run

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in TASKS:
        print(f"usage: python -m pfzoo {{{','.join(TASKS)}}} [key=value ...]", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    run(sys.argv[1], sys.argv[2:])
