"""``python -m evaluator schema``: the JSON schema of the evaluation report."""

from __future__ import annotations

import argparse
import json

HELP = "print the JSON schema of the evaluation report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--indent", type=int, default=2)


def schema_text(indent: int = 2) -> str:
    from evaluator.report import EvaluationReport

    return json.dumps(EvaluationReport.model_json_schema(), indent=indent, sort_keys=True) + "\n"


def main(args: argparse.Namespace) -> int:
    print(schema_text(args.indent), end="")
    return 0
