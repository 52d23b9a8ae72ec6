"""Attainable ceilings per GPU type and driver, measured once by ``python -m evaluator calibrate``
and cached on disk under the runner's state folder (a new driver means a new measurement)."""

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
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu_index), "PYTHONPATH": str(REPO_ROOT)}
    log.info("calibrating %s (driver %s) on GPU %d", gpu_type, driver, gpu_index)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "evaluator", "calibrate", "--json"],
            check=False, capture_output=True, text=True, env=env, timeout=CALIBRATE_TIMEOUT_S, cwd=REPO_ROOT,
        )
        data = json.loads(out.stdout) if out.returncode == 0 else None
    except (subprocess.TimeoutExpired, ValueError, OSError) as error:
        log.warning("calibration of %s failed: %s", gpu_type, error)
        return None
    if not isinstance(data, dict):
        log.warning("calibration of %s failed (exit %s): %s", gpu_type, out.returncode, out.stderr[-2000:])
        return None
    write_json(path, data)
    return path


def load(path: Path | None) -> dict[str, float]:
    if path is None:
        return {}
    try:
        return numbers_only(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}
