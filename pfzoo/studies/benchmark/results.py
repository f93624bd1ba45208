"""The JSON document ``scripts/benchmark.py`` writes: the cases' results under a ``machine`` block (the device's name,
the GPU or the CPU model, torch's version and its threads), and an ``--only`` run merged into an earlier document."""

from __future__ import annotations

import platform

import torch

from pfzoo.studies.reporting import device_name


def machine_block(device: torch.device, sizes: str) -> dict:
    """What the results were measured on: ``device``, its name, the platform, torch, CUDA and its threads, and which
    ``sizes`` the cases ran at (``"full"``, ``"cpu"`` or ``"quick"``)."""
    return {
        "device": str(device),
        "device_name": device_name(device),
        "platform": platform.platform(),
        "processor": platform.processor(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "threads": torch.get_num_threads(),
        "sizes": sizes,
    }


def merged(results: dict, earlier: dict) -> dict:
    """``results`` of an ``--only`` run merged into the ``earlier`` document: the other cases' last results kept, each
    result carrying the machine it ran on (an earlier result without its own takes the earlier document's)."""
    ran = {result["name"] for result in results["benchmarks"]}
    kept = [{**result, "machine": result.get("machine", earlier.get("machine"))}
            for result in earlier.get("benchmarks", []) if result.get("name") not in ran]
    return {**results, "benchmarks": kept + [{**result, "machine": results["machine"]} for result in results["benchmarks"]]}
