"""``solboard problem NAME --launch-spec [cuda|ptx]`` and ``--abi``: a problem's native ABI as the
site generates it from the problem's definition (the API's ``native_abi`` field), printed as a file
to start a kernel from, or as a table of parameters. Standard library only, like the whole client.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from solboard_client import commands, render
from solboard_client.output import Output

SKELETONS = {"cuda": "cuda_skeleton", "ptx": "ptx_skeleton"}


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--launch-spec",
        nargs="?",
        const="cuda",
        choices=sorted(SKELETONS),
        metavar="LANGUAGE",
        help="print a kernel skeleton with its launch spec (cuda, the default, or ptx): "
        "`solboard problem NAME --launch-spec > kernel.cu`",
    )
    parser.add_argument(
        "--abi",
        action="store_true",
        help="print the native ABI: languages, parameters in order, TMA tensors, required features",
    )


def problem(args: argparse.Namespace, out: Output) -> int:
    """The ``problem`` subcommand: the usual summary, or the native ABI / a skeleton when asked."""
    if not (getattr(args, "launch_spec", None) or getattr(args, "abi", False)):
        return commands.problem(args, out)
    body = commands.client(args).get(f"/api/problems/{args.name}")
    abi: dict[str, Any] = body.get("native_abi") or {}
    if args.json:
        render.as_json(abi)
        return commands.EXIT_OK
    if not abi.get("native"):
        languages = ", ".join(body.get("languages", []))
        print(f"solboard problem: {args.name} takes no native kernel ({languages}): {abi.get('reason', '')}",
              file=sys.stderr)
        return commands.EXIT_REFUSED
    if args.launch_spec:
        sys.stdout.write(abi[SKELETONS[args.launch_spec]])
        return commands.EXIT_OK
    print_abi(abi)
    return commands.EXIT_OK


def print_abi(abi: dict[str, Any]) -> None:
    print(f"{abi['problem']}: languages {', '.join(abi['languages'])}; targets {', '.join(abi['archs'])}")
    for arch, features in abi["required_features"].items():
        print(f"features track on {arch}: {', '.join(features) or 'nothing required'}")
    print()
    render.table(["#", "kind", "name", "carries", "TMA"], [
        (p["position"], p["kind"], p["name"], _carries(p), "may" if p["tensormap_allowed"] else "")
        for p in abi["parameters"]], out=sys.stdout)  # the stream of now (a caller may have redirected it)


def _carries(param: dict[str, Any]) -> str:
    if param["kind"] == "ptr":
        return f"{param['role']} {param['dtype']} [{', '.join(str(d) for d in param['shape'])}]"
    if param["kind"] == "f32":
        return f"constant {param['constant']} = {param['value']:g}"
    return f"axis {param['axis']}"
