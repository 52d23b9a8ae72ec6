"""Attainable ceilings per GPU type and driver, measured once by ``python -m evaluator calibrate``
and cached on disk under the runner's state folder (a new driver means a new measurement).

An x<n> slot (n GPUs of one type) also gets its link measured: ``calibrate --world-size n`` (the
all-reduce bus bandwidth, ``nvlink_gbps_per_direction``), cached per type, n and driver, and merged
with the single-GPU ceilings into the file its jobs get, so multi-GPU reports carry the SOL
fraction against the calibrated link beside the datasheet's (docs/multigpu.md)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from runners.slots import safe_name, write_json
from solboard_common.config import REPO_ROOT

log = logging.getLogger(__name__)
CALIBRATE_TIMEOUT_S = 900


def cache_file(folder: Path, gpu_type: str, driver: str) -> Path:
    return folder / f"{safe_name(gpu_type)}-driver-{safe_name(driver)}.json"


def numbers_only(data: Any, prefix: str = "") -> dict[str, float]:
    """Flatten the calibrate JSON to ``name -> number`` (what Heartbeat.calibration carries)."""
    if isinstance(data, bool):
        return {}
    if isinstance(data, (int, float)):
        return {prefix or "value": float(data)}
    if isinstance(data, dict):
        flat: dict[str, float] = {}
        for key, value in data.items():
            flat.update(numbers_only(value, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {}


def calibrate(folder: Path, gpu_type: str, driver: str, gpu_index: int) -> Path | None:
    """The cached calibration file for this GPU type + driver, measuring it when missing.

    Returns None (and logs why) when calibration fails: jobs then run with datasheet peaks only,
    and the next start tries again.
    """
    path = cache_file(folder, gpu_type, driver)
    if path.exists():
        return path
    log.info("calibrating %s (driver %s) on GPU %d", gpu_type, driver, gpu_index)
    data = _run_calibrate([], (gpu_index,), gpu_type)
    if data is None:
        return None
    write_json(path, data)
    return path


def calibrate_link(folder: Path, gpu_type: str, driver: str, gpu_indices: tuple[int, ...],
                   single: Path | None, device: str = "cuda") -> Path | None:
    """The calibration file of an x<n> slot: the single-GPU ceilings (``single``, when measured)
    with the link's bus bandwidth over the slot's GPUs. None when the link could not be measured:
    the slot's jobs then get the single-GPU file and the datasheet's link figure."""
    count = len(gpu_indices)
    path = folder / f"{safe_name(gpu_type)}-x{count}-driver-{safe_name(driver)}.json"
    if path.exists():
        return path
    log.info("calibrating the link of %d x %s (driver %s) on GPUs %s", count, gpu_type, driver, gpu_indices)
    link = _run_calibrate(
        ["--world-size", str(count), "--device", device], gpu_indices, f"{count} x {gpu_type}"
    )
    if link is None:
        return None
    base: dict[str, Any] = {}
    if single is not None:
        try:
            base = json.loads(single.read_text())
        except (OSError, ValueError):
            base = {}
    merged = {**base, "ceilings": {**(base.get("ceilings") or {}), **link.get("ceilings", {})},
              "link": link.get("link")}
    write_json(path, merged)
    return path


def _run_calibrate(extra: list[str], gpu_indices: tuple[int, ...], what: str) -> dict[str, Any] | None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(str(index) for index in gpu_indices),
           "PYTHONPATH": str(REPO_ROOT)}
    try:
        out = subprocess.run(
            [sys.executable, "-m", "evaluator", "calibrate", "--json", *extra],
            check=False, capture_output=True, text=True, env=env, timeout=CALIBRATE_TIMEOUT_S, cwd=REPO_ROOT,
        )
        data = json.loads(out.stdout) if out.returncode == 0 else None
    except (subprocess.TimeoutExpired, ValueError, OSError) as error:
        log.warning("calibration of %s failed: %s", what, error)
        return None
    if not isinstance(data, dict):
        log.warning("calibration of %s failed (exit %s): %s", what, out.returncode, out.stderr[-2000:])
        return None
    return data


def load(path: Path | None) -> dict[str, float]:
    if path is None:
        return {}
    try:
        return numbers_only(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}
