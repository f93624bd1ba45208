"""Every bare ``python scripts/evaluate.py model=X estimator=Y`` as a new user types it: its exit code, wall time
and what it printed last, as JSON and a Markdown table.

    python scripts/bare_commands.py [--output reports/bare_commands] [--models rbm dbm ...] [--estimators ais raise ...]

A command passes when it prints an estimate and exits 0 within the time limit (default 60 s, the promise of the
README), or exits 2 with exactly one ``error:`` line (a refusal naming what to use instead). Commands run one at a
time in a subprocess from the repository root, with no data root, so that each pays its own start-up like a user's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from pfzoo.studies.reporting import load_average, machine_description

REPO = Path(__file__).resolve().parents[1]


def config_names(group: str) -> list[str]:
    return sorted(path.stem for path in (REPO / "conf" / group).glob("*.yaml"))


def run(model: str, estimator: str, limit: float, run_dir: Path) -> dict:
    """One bare command's outcome: ``ok`` (an estimate in time), ``refused`` (exit 2, one error line) or ``failed``."""
    command = [sys.executable, str(REPO / "scripts" / "evaluate.py"), f"model={model}", f"estimator={estimator}",
               f"run_dir={run_dir / f'{model}-{estimator}'}", "progress=false"]
    started = time.perf_counter()
    try:
        environment = {key: value for key, value in os.environ.items() if key != "PFZOO_DATA"}  # no data root, as on a fresh machine
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=limit * 3, env=environment)
        code, out, err = result.returncode, result.stdout, result.stderr
    except subprocess.TimeoutExpired:
        code, out, err = None, "", f"killed after {limit * 3:.0f} s"
    seconds = time.perf_counter() - started
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    estimate = next((line for line in out.splitlines() if line.startswith(("test log-likelihood", "lower estimate"))), None)
    if code == 0 and estimate is not None and seconds <= limit:
        outcome, said = "ok", estimate
    elif code == 2 and len(errors) == 1 and "Traceback" not in err:
        outcome, said = "refused", errors[0]
    else:
        last_lines = err.strip().splitlines() or ["(nothing on stderr)"]
        outcome, said = "failed", f"exit {code} after {seconds:.0f} s: {estimate or last_lines[-1]}"
    return {"model": model, "estimator": estimator, "outcome": outcome, "exit_code": code, "seconds": round(seconds, 1), "said": said}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=config_names("model"))
    parser.add_argument("--estimators", nargs="+", default=config_names("estimator"))
    parser.add_argument("--limit", type=float, default=60.0, help="seconds an estimate may take (default 60)")
    parser.add_argument("--output", type=Path, default=REPO / "reports" / "bare_commands")
    args = parser.parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    rows = []
    for model in args.models:
        for estimator in args.estimators:
            rows.append(run(model, estimator, args.limit, args.output / "runs"))
            print(f"{model:18s} {estimator:18s} {rows[-1]['outcome']:8s} {rows[-1]['seconds']:6.1f} s  {rows[-1]['said'][:100]}", flush=True)
    summary = {outcome: sum(row["outcome"] == outcome for row in rows) for outcome in ("ok", "refused", "failed")}
    results = {"machine": machine_description(), "load_average": load_average(), "limit_seconds": args.limit, "summary": summary, "rows": rows}
    (args.output / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    table = ["| model | estimator | outcome | s | what it said |", "|---|---|---|---:|---|"]
    table += [f"| {r['model']} | {r['estimator']} | {r['outcome']} | {r['seconds']} | {r['said'].replace('|', '/')} |" for r in rows]
    (args.output / "table.md").write_text(
        f"# Bare `scripts/evaluate.py model=X estimator=Y` commands\n\n{machine_description()}; limit {args.limit:g} s. "
        f"{summary['ok']} estimates, {summary['refused']} one-line refusals, {summary['failed']} failures.\n\n" + "\n".join(table) + "\n"
    )
    print(f"{summary}; written to {args.output}")
    sys.exit(1 if summary["failed"] else 0)


if __name__ == "__main__":
    main()
