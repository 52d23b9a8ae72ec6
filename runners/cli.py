"""``solboard runner [--device auto|cuda|cpu] [--broker-file FILE] [--credential-file FILE] [--name NAME]
[--gpus 0,1] [--scratch DIR]``

Starts a runner node (see node.py). ``solboard runner`` dispatches here; ``python -m runners``
does the same without the console script.

Secrets never go on the command line (every user of the host can read /proc/<pid>/cmdline): the
broker URL comes from CELERY_BROKER_URL or a 0600 file (``--broker-file``, SOLBOARD_BROKER_URL_FILE),
the runner credential from SOLBOARD_RUNNER_CREDENTIAL or a 0600 file (``--credential-file``,
SOLBOARD_RUNNER_CREDENTIAL_FILE, else ``$SOLBOARD_VAR/runner-credential`` as ``make run`` writes it).
``--broker URL`` still works, with a warning when the URL holds a password.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit

from runners.node import Node, NodeConfig, NodeError
from runners.spares import SPARES_VARIABLE
from solboard_common.config import (
    ConfigError,
    broker_url,
    broker_url_from_file,
    default_credential_file,
    env_bool,
    env_float,
)
from solboard_common.protocol import control_queue
from solboard_common.signing import (
    Credential,
    CredentialError,
    credential_from_environment,
    parse_credential,
    read_private_file,
)

log = logging.getLogger("runners")


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
    parser.add_argument(
        "--broker",
        help="Broker URL: deprecated, a password here is visible to every user of "
        "the host (use CELERY_BROKER_URL or --broker-file).",
    )
    parser.add_argument("--broker-file", type=Path,
                        help="A 0600 file holding the broker URL (default: CELERY_BROKER_URL, "
                        "SOLBOARD_BROKER_URL_FILE, else the embedded broker).")
    parser.add_argument(
        "--credential-file",
        type=Path,
        help="A 0600 file holding this node's runner credential (default: "
        "SOLBOARD_RUNNER_CREDENTIAL, SOLBOARD_RUNNER_CREDENTIAL_FILE, else $SOLBOARD_VAR/runner-credential).",
    )
    parser.add_argument("--name", type=_name, help="Node name (default: the credential's node name).")
    parser.add_argument("--gpus", type=_gpu_list, help="Only these GPU indices (NVML numbering), e.g. 0,1.")
    parser.add_argument("--scratch", type=Path, help="Where job scratch folders go (default: STATE/scratch).")
    parser.add_argument("--state-dir", type=Path, help="State folder (default: var/runner/NAME).")
    parser.add_argument("--loglevel", default="INFO")
    return parser


def resolve_broker(args: argparse.Namespace) -> str:
    if args.broker_file is not None:
        return broker_url_from_file(args.broker_file)
    if args.broker:
        if urlsplit(args.broker).password:
            log.warning("--broker puts the broker password on the command line, where every user of this "
                        "host can read it (/proc/<pid>/cmdline): use CELERY_BROKER_URL or --broker-file FILE")
        return str(args.broker)
    return broker_url()


def resolve_credential(path: Path | None) -> Credential:
    """The node's runner credential: --credential-file, else the environment, else var/."""
    found = (parse_credential(read_private_file(path, "runner credential")) if path is not None
             else credential_from_environment(default_credential_file()))
    if found is None:
        raise CredentialError(
            "no runner credential: ask the site's operator for one (`manage.py runner_credentials issue NODE "
            "--output FILE`), then pass --credential-file FILE or set SOLBOARD_RUNNER_CREDENTIAL_FILE")
    return found


def node_name(requested: str | None, credential: Credential) -> str:
    """The credential speaks for one node: --name may repeat it, not change it."""
    if requested and requested != credential.node:
        raise CredentialError(
            f"--name {requested!r}, but the runner credential is for node {credential.node!r} "
            "(the site accepts messages from that node only)"
        )
    try:
        control_queue(credential.node)
    except ValueError:
        raise CredentialError(
            f"the runner credential names node {credential.node!r}, not a node name"
        ) from None
    return credential.node


def build_config(args: argparse.Namespace) -> NodeConfig:
    """The node's one configuration: command line and environment, read once at start."""
    device, gpu_indices = args.device, args.gpus
    if device.isdigit():
        device, gpu_indices = "cuda", [int(device)]
    credential = resolve_credential(args.credential_file)
    return NodeConfig(name=node_name(args.name, credential), broker_url=resolve_broker(args),
                      credential=credential, device=device, gpu_indices=gpu_indices,
                      state_dir=args.state_dir, scratch=args.scratch, loglevel=args.loglevel,
                      heartbeat_seconds=env_float("SOLBOARD_HEARTBEAT_SECONDS", 10.0, minimum=0.5),
                      warm_spares=env_bool(SPARES_VARIABLE, True))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.loglevel, format="%(asctime)s %(levelname)s runner %(name)s: %(message)s")
    try:
        config = build_config(args)
        # Celery reads CELERY_BROKER_URL before its configured broker_url: make them agree, or
        # --broker would be ignored by this process's own messages (heartbeats).
        os.environ["CELERY_BROKER_URL"] = config.broker_url
        node = Node(config)
        node.prepare()
    except (NodeError, ConfigError, CredentialError) as error:
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
