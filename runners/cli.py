"""``solboard runner [--device auto|cuda|cpu] [--broker URL] [--name NAME] [--gpus 0,1] [--scratch DIR]``

Starts a runner node (see node.py). ``solboard runner`` dispatches here; ``python -m runners``
does the same without the console script.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from runners.config import ConfigError, broker_url
from runners.node import Node, NodeConfig, NodeError, default_name
from runners.protocol import control_queue


def _gpu_list(text: str) -> list[int]:
    try:
        indices = [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--gpus wants indices like 0,1 (got {text!r})") from None
    if not indices or min(indices) < 0:
        raise argparse.ArgumentTypeError(f"--gpus wants indices like 0,1 (got {text!r})")
    return indices


def _device(text: str) -> str:
    if text in ("auto", "cuda", "cpu") or text.isdigit():
        return text
    raise argparse.ArgumentTypeError(f"--device wants auto, cuda, cpu or a GPU index (got {text!r})")


def _name(text: str) -> str:
    try:
        control_queue(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--name {text!r}: letters, digits, '-', '_' and '.' only") from None
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="solboard runner", description="Run a SOLboard runner node.")
    parser.add_argument("--device", type=_device, default="auto",
                        help="auto (every GPU NVML finds, else the CPU development device), cuda, cpu, "
                        "or one GPU index (the same as --device cuda --gpus INDEX).")
    parser.add_argument("--broker", help="Broker URL (default: CELERY_BROKER_URL, else the embedded broker).")
    parser.add_argument("--name", type=_name, help="Node name (default: the host name).")
    parser.add_argument("--gpus", type=_gpu_list, help="Only these GPU indices (NVML numbering), e.g. 0,1.")
    parser.add_argument("--scratch", type=Path, help="Where job scratch folders go (default: STATE/scratch).")
    parser.add_argument("--state-dir", type=Path, help="State folder (default: var/runner/NAME).")
    parser.add_argument("--loglevel", default="INFO")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.loglevel, format="%(asctime)s %(levelname)s runner %(name)s: %(message)s")
    try:
        device, gpu_indices = args.device, args.gpus
        if device.isdigit():
            device, gpu_indices = "cuda", [int(device)]
        config = NodeConfig(name=args.name or default_name(), broker_url=args.broker or broker_url(),
                            device=device, gpu_indices=gpu_indices, state_dir=args.state_dir,
                            scratch=args.scratch, loglevel=args.loglevel)
        # Celery reads CELERY_BROKER_URL before its configured broker_url: make them agree, or
        # --broker would be ignored by this process's own messages (heartbeats).
        os.environ["CELERY_BROKER_URL"] = config.broker_url
        node = Node(config)
        node.prepare()
    except (NodeError, ConfigError) as error:
        print(f"solboard runner: {error}", file=sys.stderr)
        return 2

    def stop(signum: int, frame: FrameType | None) -> None:
        node.stop_event.set()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    slots = ", ".join(f"{slot.key} -> {slot.queue}" for slot in node.slots)
    logging.getLogger("runners").info("node %s serving %s", config.name, slots)
    node.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
