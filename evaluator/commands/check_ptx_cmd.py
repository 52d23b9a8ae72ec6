"""``python -m evaluator check-ptx FILE --arch sm_90a [--problem NAME] [--spec FILE] [--json]``:
assemble a PTX (or compile a .cu) submission for each target and print ok or the errors, each
kernel's registers/spills/shared memory/barriers and the instruction families found in the PTX
and in the SASS; with --problem, also the spec against the problem's ABI and every shape, and the
problem's required features. It is the site's upload validation (``validate_upload``), verbatim.

Exit status: 0 when the check ran (whatever the verdict: read ``ok``), 2 when it could not run
(unreadable file, unknown problem)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evaluator.vocabulary import language_of_file

HELP = "Validate a PTX/CUDA submission with ptxas: errors, resources, PTX and SASS instruction families."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="A .ptx file, or a .cu file (compiled with nvcc).")
    parser.add_argument(
        "--arch", action="append", help="Target (sm_90a, sm_100a) or GPU type (h200); repeatable."
    )
    parser.add_argument("--problem", help="Check the spec against this problem's ABI and shapes.")
    parser.add_argument(
        "--spec", type=Path, help="Launch spec file (TOML) instead of the source's comment block."
    )
    parser.add_argument("--language", choices=["ptx", "cuda"], help="Default: from the file's extension.")
    parser.add_argument("--json", action="store_true", help="Print the UploadValidation JSON.")


def main(args: argparse.Namespace) -> int:
    from evaluator.problems import CatalogueError
    from evaluator.ptx import validate_upload

    language = args.language or ("cuda" if language_of_file(args.file.name) == "cuda" else "ptx")
    try:
        source = args.file.read_text()
        spec = args.spec.read_text() if args.spec else None
        result = validate_upload(language, source, spec, args.problem, args.arch or ["sm_90a"])
    except (OSError, UnicodeDecodeError, CatalogueError) as error:
        print(f"check-ptx: {error}", file=sys.stderr)
        return 2
    print(result.model_dump_json(indent=2) if args.json else render(result, args.file.name))
    return 0


def render(result: object, name: str) -> str:
    from evaluator.ptx.models import UploadValidation

    assert isinstance(result, UploadValidation)
    problem = f", problem {result.problem}" if result.problem else ""
    lines = [f"{name} ({result.language}{problem}): {'ok' if result.ok else 'REFUSED'}"]
    lines += [f"  error: {message}" for message in (_d(d) for d in result.errors)]
    lines += [f"  warning: {_d(d)}" for d in result.warnings]
    for arch in result.archs:
        lines += _render_arch(arch)
    return "\n".join(lines)


def _render_arch(arch: object) -> list[str]:
    from evaluator.ptx.models import ArchValidation

    assert isinstance(arch, ArchValidation)
    note = (
        "" if arch.verified_on_hardware else " [supported from specifications; not yet verified on hardware]"
    )
    lines = [f"- {arch.arch} ({arch.gpus}): {'ok' if arch.ok else 'errors'}{note}"]
    lines += [f"    error: {_d(d)}" for d in arch.errors]
    lines += [f"    warning: {_d(d)}" for d in arch.warnings]
    for k in arch.kernels:
        mark = "*" if k.name == arch.entry else " "
        lines.append(
            f"  {mark} {k.name}: {k.registers} registers, {k.spill_store_bytes + k.spill_load_bytes} "
            f"spill bytes, {k.stack_frame_bytes} B stack, {k.shared_memory_bytes} B static smem, "
            f"{k.barriers} barriers"
        )
    if arch.evidence is not None:
        ev = arch.evidence
        lines.append(f"    PTX families:  {_families(ev.ptx_families)}")
        lines.append(f"    SASS families: {_families(ev.sass_families)}")
        if ev.required:
            lines.append(
                f"    required: {', '.join(ev.required)}; missing: {', '.join(ev.missing) or 'none'}"
            )
    return lines


def _families(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} x{count}" for name, count in sorted(counts.items())) or "none"


def _d(diagnostic: object) -> str:
    from evaluator.ptx.models import Diagnostic

    assert isinstance(diagnostic, Diagnostic)
    where = f"line {diagnostic.line}: " if diagnostic.line is not None else ""
    return f"[{diagnostic.stage}] {where}{diagnostic.message}"
