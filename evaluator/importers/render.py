"""Writing a candidate as a catalogue folder: problem.toml (with its [import] table), counts.py
(the source's, the derived table, or zero counts) and the three-line reference.py.

Pure Python (no torch).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from evaluator.importers.common import ADAPTER_FILE, CONVERTER_VERSION, SHAPE_FLAGS, Candidate

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # 1e-05, inf, nan: all valid TOML floats
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(key)} = {toml_value(item)}" for key, item in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _multiline(text: str) -> str:
    clean = "".join(char for char in text if char in "\n\t" or char >= " ")
    return '"""\n' + clean.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') + '\n"""'


def _head(candidate: Candidate, version: int) -> list[str]:
    lines = [
        f"# Written by `python -m evaluator import-problems --format {candidate.format}`: "
        "do not edit; import",
        "# again with --replace (docs/importing.md).",
        f"name = {toml_value(candidate.name)}",
        f"title = {toml_value(candidate.title)}",
        f"version = {version}",
        'kind = "single"',
        f"description = {_multiline(candidate.description)}",
        f"axes = {toml_value(candidate.axes)}",
        f"baseline = {toml_value(candidate.baseline)}",
        f"languages = {toml_value(candidate.languages)}",
        f"# The inputs {candidate.format} itself draws (docs/importing.md).",
        f"distributions = {toml_value(candidate.distributions)}",
        "test_seeds = [1, 2, 3]",
    ]
    if candidate.scalar_args:
        lines.append(f"scalar_args = {toml_value(candidate.scalar_args)}")
    return lines


def _tensors(candidate: Candidate) -> list[str]:
    lines = []
    for table, specs in (("inputs", candidate.inputs), ("outputs", candidate.outputs)):
        for spec in specs:
            lines += ["", f"[[{table}]]", f"name = {toml_value(spec['name'])}",
                      f"shape = {toml_value(list(spec['shape']))}", f"dtype = {toml_value(spec['dtype'])}"]
    return lines


def _tolerance(candidate: Candidate) -> list[str]:
    tolerance = candidate.tolerance
    if candidate.widened:
        upstream = candidate.widened["upstream"]
        factors = candidate.widened["factors"]
        lines = [
            "",
            f"# From {candidate.format}, widened at import (atol x{factors['atol']:.3g}, rtol "
            f"x{factors['rtol']:.3g}): upstream's atol {upstream['atol']:g}, rtol {upstream['rtol']:g}",
            "# is tighter than the reference's own rounding ([import] upstream_tolerance, notes).",
            "[tolerance]",
        ]
    else:
        lines = ["", f"# From {candidate.format}: see the [import] notes.", "[tolerance]"]
    lines += [f"{key} = {toml_value(float(tolerance[key]))}" for key in ("atol", "rtol", "matched_ratio")]
    for output, values in candidate.output_tolerances.items():
        lines += ["", f"[tolerance.{_key(output)}]"]
        lines += [f"{key} = {toml_value(float(value))}" for key, value in values.items()]
    return lines


def _ptx_table(candidate: Candidate) -> list[str]:
    """The native ABI (evaluator/importers/native_table.py; docs/ptx.md, section 3)."""
    if not candidate.ptx:
        return []
    lines = ["", "# PTX/CUDA parameter ABI, derived from the source's declared tensors and scalars.", "[ptx]"]
    lines += [f"{key} = {toml_value(value)}" for key, value in candidate.ptx.items() if key != "constants"]
    if candidate.ptx.get("constants"):
        lines += ["", "[ptx.constants]"]
        lines += [
            f"{_key(name)} = {toml_value(float(value))}" for name, value in candidate.ptx["constants"].items()
        ]
    return lines


def _import_table(candidate: Candidate) -> list[str]:
    return [
        "",
        "[import]",
        f"format = {toml_value(candidate.format)}",
        f"source = {toml_value(candidate.provenance)}",
        f"upstream_name = {toml_value(candidate.upstream_name)}",
        f"source_sha256 = {toml_value(candidate.source_digest)}",
        f"converter_version = {CONVERTER_VERSION}",
        f"counts = {toml_value(candidate.counts_mode)}",
        f"tolerance = {toml_value('widened' if candidate.widened else 'upstream')}",
        *([f"gpu_only = {toml_value(candidate.gpu_only)}"] if candidate.gpu_only else []),
        *_widened(candidate),
        f"dropped = {toml_value(candidate.dropped)}",
        f"notes = {toml_value(candidate.notes)}",
    ]


def _widened(candidate: Candidate) -> list[str]:
    """Upstream's tolerance and the factor every tolerance was widened by, when it was."""
    if not candidate.widened:
        return []
    upstream = {key: float(value) for key, value in candidate.widened["upstream"].items()}
    factors = {key: float(value) for key, value in candidate.widened["factors"].items()}
    return [f"tolerance_factors = {toml_value(factors)}", f"upstream_tolerance = {toml_value(upstream)}"]


def _shapes(candidate: Candidate) -> list[str]:
    lines = []
    for shape in candidate.shapes:
        lines += ["", "[[shapes]]", f"id = {toml_value(str(shape['id']))}"]
        lines += [f"{_key(axis)} = {toml_value(int(shape[axis]))}" for axis in candidate.axes]
        flags = {
            "ranked": candidate.ranked(shape),
            "quick": bool(shape.get("quick")),
            "cpu": bool(shape.get("cpu")),
        }
        lines += [f"{flag} = {toml_value(flags[flag])}" for flag in SHAPE_FLAGS]
        if shape.get("tolerance"):
            lines.append(f"tolerance = {toml_value({k: float(v) for k, v in shape['tolerance'].items()})}")
    return lines


def render_problem_toml(candidate: Candidate, version: int) -> str:
    """problem.toml of a candidate (the catalogue's format, plus the [import] table)."""
    lines = _head(candidate, version) + _tensors(candidate) + _tolerance(candidate) + _ptx_table(candidate)
    lines += _import_table(candidate) + _shapes(candidate)
    return "\n".join(lines) + "\n"


MISSING_COUNTS = '''"""Counts of {name}: MISSING, so the problem is not rankable.

No flop or byte counts could be given or derived for this problem ({format}): every shape is
unranked, and the counts below are zero (`python -m evaluator sol` says "no counts"). To rank it,
put a counts.py in SOLboard's format (docs/problems.md) next to the source and import again.
"""

from __future__ import annotations

from evaluator.problems import Counts


def counts(axes: dict[str, int]) -> Counts:
    return Counts(flops={{}}, bytes=0.0)
'''

DERIVED_COUNTS = (
    '''"""Counts of {name}: DERIVED automatically at import (docs/importing.md, '''
    '''"Derived counts").

{method}

Each shape's figures were measured on the reference at that shape: flops by class from torch's
FlopCounterMode (matrix products, convolutions, attention: exact for what the reference computes)
plus one fp32 SIMT flop per element of each elementwise op and per element a reduction reads
(loose: they follow how the reference is written), and bytes as the compulsory traffic (every
input read once, every output written once: a lower bound, loose where a kernel cannot avoid
intermediates). Not a hand count: where the two differ, a hand-written counts.py wins. A shape
with no row below (one a partial conversion left unranked) has no counts: zero, as `evaluator sol`
reports it.
"""

from __future__ import annotations

import json

from evaluator.problems import Counts

DERIVED = {table}


def counts(axes: dict[str, int]) -> Counts:
    key = json.dumps(dict(sorted(axes.items())), separators=(",", ":"))
    row = DERIVED.get(key)
    if row is None:
        return Counts(flops={{}}, bytes=0.0)
    return Counts(flops=dict(row["flops"]), bytes=float(row["bytes"]))
'''
)


def render_counts(candidate: Candidate) -> str:
    if candidate.counts_source is not None:
        return candidate.counts_source
    if not candidate.derived:
        return MISSING_COUNTS.format(name=candidate.name, format=candidate.format)
    rows = {}
    for shape in candidate.shapes:
        row = candidate.derived.get(str(shape["id"]))
        if row is not None:
            key = json.dumps(
                dict(sorted((axis, int(shape[axis])) for axis in candidate.axes)), separators=(",", ":")
            )
            rows[key] = {"flops": row["flops"], "bytes": row["bytes"]}
    table = json.dumps(rows, indent=4, sort_keys=True)
    method = "The reference is the upstream code of this problem; see problem.toml's [import] notes."
    return DERIVED_COUNTS.format(name=candidate.name, method=method, table=table)


REFERENCE_PY = '''"""{name}: imported from {format} ({upstream}) by `python -m evaluator import-problems`.

Do not edit: the reference is the upstream code in upstream/, and adapter.json says how SOLboard's
contract maps onto it (evaluator/importers/runtime.py, docs/importing.md).
"""

from __future__ import annotations

from evaluator.importers.runtime import adapter_for

_adapter = adapter_for(__file__)
generate_inputs = _adapter.generate_inputs
reference = _adapter.reference
baseline = _adapter.baseline
independent_reference = _adapter.independent_reference
'''


def render_reference(candidate: Candidate) -> str:
    return REFERENCE_PY.format(name=candidate.name, format=candidate.format, upstream=candidate.upstream_name)


def write_folder(candidate: Candidate, folder: Path, version: int) -> None:
    """The candidate as a catalogue folder (``folder``'s name must be the candidate's name)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "problem.toml").write_text(render_problem_toml(candidate, version))
    (folder / "counts.py").write_text(render_counts(candidate))
    (folder / "reference.py").write_text(render_reference(candidate))
    (folder / ADAPTER_FILE).write_text(json.dumps(candidate.adapter, indent=2) + "\n")
    for relative, text in candidate.files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
