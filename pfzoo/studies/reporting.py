"""What the reproduction, card and benchmark scripts record beside their numbers: the machine and its load.

A report's wall times mean little without the machine that took them; these helpers describe it.
They never print.
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import time
from pathlib import Path
from typing import Callable, Collection, Mapping, Sequence

import torch


def load_average() -> list[float] | None:
    """The 1/5/15-minute load averages (other jobs on the machine slow the wall times down), if the OS reports them."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def git_commit(repo: str | os.PathLike) -> str | None:
    """HEAD of the checkout at ``repo``, with ``+dirty`` when pfzoo/ or conf/ have uncommitted changes; None outside a
    checkout (or without git)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(repo), capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "pfzoo", "conf"], cwd=Path(repo), capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty.strip() else "")


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (e.g. "AMD EPYC 7B13"), else what :mod:`platform` knows."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description() -> str:
    """E.g. "2-core AMD EPYC ... CPU, Linux 6.x, Python 3.11.7"."""
    return f"{os.cpu_count()}-core {cpu_name()} CPU, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def run_header(argv: Sequence[str], threads: int) -> dict:
    """What a reproduction's results.json says first about the run that made it: ``command`` (``python`` and ``argv``,
    quoted for a shell), ``date`` (to the second), ``machine``, torch ``threads`` and ``load_average``."""
    return {"command": "python " + shlex.join(argv), "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "machine": machine_description(), "threads": threads, "load_average": load_average()}


def card_command(script: str, argv: Sequence[str], *, flags: Collection[str] = ("--write",),
                 local_options: Collection[str] = ("--data-root", "--zoo")) -> str:
    """The command a model card records for ``python <script> <argv>``, quoted for a shell, without the ``flags`` that
    only say where the result goes and without the ``local_options`` naming this machine's folders (``--data-root DIR``
    or ``--data-root=DIR``): a reader reruns it with their own."""
    kept, skip = [], False
    for argument in argv:
        if skip:
            skip = False
        elif argument in flags or argument.split("=", 1)[0] in local_options:
            skip = argument in local_options  # the folder follows as the next argument
        else:
            kept.append(argument)
    return shlex.join(["python", script, *kept])


def settings_record(arguments: Mapping, *, leave_out: Collection[str] = ()) -> dict:
    """A script's parsed ``arguments`` (``vars(args)``) as results.json stores its settings: paths as strings, the
    arguments named in ``leave_out`` (where to write, what to render) left out."""
    return {key: str(value) if isinstance(value, Path) else value for key, value in arguments.items() if key not in leave_out}


def with_kept_section(text: str, previous: str, title: str) -> str:
    """``text`` (a freshly rendered README) followed by the ``## title`` section of ``previous`` (the README it replaces), up
    to the next ``## `` heading, when ``previous`` has one: how a section that another study writes (e.g. the GSM diagnosis
    in ``reports/principles``) survives a re-render of the report around it."""
    heading = f"\n## {title}\n"
    start = previous.find(heading)
    if start < 0:
        return text
    end = previous.find("\n## ", start + len(heading))
    section = previous[start + 1:] if end < 0 else previous[start + 1:end + 1]
    return text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"


def device_name(device: torch.device) -> str:
    """What ran the numbers: the GPU's name (e.g. "NVIDIA H100 80GB HBM3") for CUDA, the CPU model otherwise."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()


def pick_threads(requested: str, workload: Callable[[int], None]) -> tuple[int, dict]:
    """``requested`` threads, or with "auto" the faster of 1 and 2 on ``workload(num_steps)``.

    ``workload`` runs a short estimate; it is called once with a few steps as a warm-up, then timed.
    Returns the thread count and the timings (seconds per thread count) for the report.
    """
    if requested != "auto":
        return int(requested), {}
    timings = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        workload(20)
        began = time.perf_counter()
        workload(300)
        timings[threads] = time.perf_counter() - began
    return (2 if timings[2] < timings[1] else 1), {f"{t} thread(s)": round(s, 3) for t, s in timings.items()}
