"""Which architecture features a kernel uses, and how we know it.

Three levels, weakest first: instruction families written in the PTX; opcode families in the SASS
that ptxas produced (``cuobjdump --dump-sass`` of the cubin: dead code is gone, so this is what the
GPU can run); and executed-instruction counts per opcode from Nsight Compute (PTXBench counts
"used" as "executed"). A required feature is evidenced by the strongest level available.
"""

from __future__ import annotations

import csv
import io
import re
import tempfile
from pathlib import Path

from evaluator.ptx.abi import strip_comments
from evaluator.ptx.toolchain import find_tool, run_tool
from evaluator.report import FeatureEvidence

#: PTX family -> pattern over comment-free PTX.
PTX_FAMILIES: dict[str, re.Pattern[str]] = {
    "wgmma.mma_async": re.compile(r"\bwgmma\.mma_async\b"),
    "cp.async.bulk.tensor": re.compile(r"\bcp(?:\.reduce)?\.async\.bulk\.(?:prefetch\.)?tensor\b"),
    "cp.async.bulk": re.compile(r"\bcp(?:\.reduce)?\.async\.bulk\.(?!tensor|prefetch\.tensor)"),
    "mma.sync": re.compile(r"(?<![\w.])mma\.sync\b"),
    "wmma": re.compile(r"(?<![\w.])wmma\.mma\b"),
    "ldmatrix": re.compile(r"\bldmatrix\b"),
    "stmatrix": re.compile(r"\bstmatrix\b"),
    "cp.async": re.compile(r"\bcp\.async\.(?:ca|cg)\b"),
    "mbarrier": re.compile(r"\bmbarrier\."),
    "setmaxnreg": re.compile(r"\bsetmaxnreg\b"),
    "tcgen05": re.compile(r"\btcgen05\."),
    "multimem": re.compile(r"\bmultimem\."),
}

#: SASS family -> opcode prefixes (the opcode is the first word of an instruction row).
SASS_FAMILIES: dict[str, tuple[str, ...]] = {
    "HGMMA": ("HGMMA",),
    "QGMMA": ("QGMMA",),
    "IGMMA": ("IGMMA",),
    "UTMALDG": ("UTMALDG",),
    "UTMASTG": ("UTMASTG",),
    "UTMAREDG": ("UTMAREDG",),
    "UBLKCP": ("UBLKCP",),
    "HMMA": ("HMMA",),
    "IMMA": ("IMMA",),
    "LDSM": ("LDSM",),
    "STSM": ("STSM",),
    "LDGSTS": ("LDGSTS",),
    "SYNCS": ("SYNCS",),
    "USETMAXREG": ("USETMAXREG",),
    "WARPGROUP": ("WARPGROUP",),
    "UTC*": ("UTC",),
    "LDTM/STTM": ("LDTM", "STTM"),
}

#: Feature -> (PTX families, SASS families) that evidence it.
FEATURES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "wgmma": (("wgmma.mma_async",), ("HGMMA", "QGMMA", "IGMMA")),
    "tma": (("cp.async.bulk.tensor",), ("UTMALDG", "UTMASTG", "UTMAREDG")),
    "tcgen05": (("tcgen05",), ("UTC*", "LDTM/STTM")),
    "mma_sync": (("mma.sync", "wmma"), ("HMMA", "IMMA")),
    "ldmatrix": (("ldmatrix",), ("LDSM",)),
    "cp_async": (("cp.async",), ("LDGSTS",)),
    "mbarrier": (("mbarrier",), ("SYNCS",)),
    "setmaxnreg": (("setmaxnreg",), ("USETMAXREG",)),
    "multimem": (("multimem",), ()),
}

# An executable SASS row starts with its address comment: /*0a30*/  @!P0 HGMMA.64x128x16.F32.BF16 ...
_SASS_ROW = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?(?P<op>[A-Z][A-Z0-9_]*)")


def ptx_families(ptx: str) -> dict[str, int]:
    text = strip_comments(ptx)
    counts = {name: len(pattern.findall(text)) for name, pattern in PTX_FAMILIES.items()}
    return {name: count for name, count in counts.items() if count}


def sass_opcodes(sass: str) -> dict[str, int]:
    """Static count of each opcode (first word, modifiers dropped) in a SASS listing."""
    counts: dict[str, int] = {}
    for line in sass.splitlines():
        match = _SASS_ROW.match(line)
        if match:
            counts[match.group("op")] = counts.get(match.group("op"), 0) + 1
    return counts


def families_from_opcodes(opcodes: dict[str, int]) -> dict[str, int]:
    """Group opcode counts (static or executed) into the SASS families above."""
    families: dict[str, int] = {}
    for opcode, count in opcodes.items():
        base = opcode.split(".", 1)[0].upper()
        for family, prefixes in SASS_FAMILIES.items():
            if base.startswith(prefixes) and count:
                families[family] = families.get(family, 0) + count
    return families


def dump_sass(cubin: bytes) -> str | None:
    """SASS text of a cubin, or None when cuobjdump/nvdisasm are not installed here."""
    if find_tool("cuobjdump") is None or find_tool("nvdisasm") is None:
        return None
    with tempfile.TemporaryDirectory(prefix="solboard-sass-") as tmp:
        (Path(tmp) / "k.cubin").write_bytes(cubin)
        result = run_tool("cuobjdump", ["--dump-sass", "k.cubin"], Path(tmp), timeout_s=120)
    return result.stdout if result.returncode == 0 else None


def missing_features(
    required: list[str], ptx: dict[str, int], sass: dict[str, int] | None, executed: dict[str, int] | None
) -> list[str]:
    """Required features with no evidence at the strongest level available."""
    missing = []
    for feature in required:
        ptx_names, sass_names = FEATURES.get(feature, ((), ()))
        if executed is not None:
            found = any(executed.get(n, 0) > 0 for n in sass_names)
        elif sass is not None and sass_names:
            found = any(sass.get(n, 0) > 0 for n in sass_names)
        else:
            found = any(ptx.get(n, 0) > 0 for n in ptx_names)
        if not found:
            missing.append(feature)
    return missing


def build_evidence(
    arch: str,
    ptx: str,
    cubin: bytes | None,
    required: list[str],
    resources: tuple[int | None, int | None, int | None] = (None, None, None),
) -> tuple[FeatureEvidence, str | None]:
    """Static evidence for one target (and the SASS listing, when cuobjdump ran)."""
    ptx_counts = ptx_families(ptx)
    sass_text = dump_sass(cubin) if cubin is not None else None
    sass_counts = families_from_opcodes(sass_opcodes(sass_text)) if sass_text is not None else None
    registers, spills, smem = resources
    evidence = FeatureEvidence(
        arch=arch,
        ptx_families=ptx_counts,
        sass_families=sass_counts or {},
        required=list(required),
        missing=missing_features(list(required), ptx_counts, sass_counts, None),
        evidence_level="static",
        registers=registers,
        spill_bytes=spills,
        shared_memory_bytes=smem,
    )
    return evidence, sass_text


def with_executed(evidence: FeatureEvidence, executed_opcodes: dict[str, int]) -> FeatureEvidence:
    """The same evidence upgraded with executed opcode counts from ncu (per opcode, summed)."""
    executed = families_from_opcodes(executed_opcodes)
    missing = missing_features(evidence.required, evidence.ptx_families, evidence.sass_families, executed)
    return evidence.model_copy(
        update={"executed_families": executed, "missing": missing, "evidence_level": "executed"}
    )


#: The Nsight Compute metric with one instance per executed SASS opcode (warp-level counts).
NCU_OPCODE_METRIC = "sass__inst_executed_per_opcode"
_INSTANCE = re.compile(r"([A-Z][A-Z0-9_]*)(?:\.[A-Za-z0-9_]+)*\s*:\s*([0-9][0-9,]*)")


def parse_opcode_instances(cell: str) -> dict[str, int]:
    """One metric cell printed with ``--print-metric-instances details``, e.g.
    ``580,032 (HGMMA: 16,384; IMAD: 1,024)`` -> ``{"HGMMA": 16384, "IMAD": 1024}`` (modifiers,
    if any, are folded into the base opcode)."""
    counts: dict[str, int] = {}
    for opcode, number in _INSTANCE.findall(cell):
        counts[opcode] = counts.get(opcode, 0) + int(number.replace(",", ""))
    return counts


def executed_opcodes_from_raw_csv(text: str, metric: str = NCU_OPCODE_METRIC) -> dict[str, dict[str, int]]:
    """Per kernel name, executed counts per opcode from ``ncu --import R --csv --page raw
    --print-metric-instances details`` of a report that collected ``--metrics {metric}``."""
    rows = list(csv.reader(io.StringIO(text)))
    header_at = next((i for i, row in enumerate(rows) if metric in row and "Kernel Name" in row), None)
    if header_at is None:
        return {}
    header = rows[header_at]
    column, name_column = header.index(metric), header.index("Kernel Name")
    kernels: dict[str, dict[str, int]] = {}
    for row in rows[header_at + 1 :]:
        if len(row) == len(header) and ":" in row[column]:
            counts = kernels.setdefault(row[name_column], {})
            for opcode, count in parse_opcode_instances(row[column]).items():
                counts[opcode] = counts.get(opcode, 0) + count
    return kernels


def missing_reason(evidence: FeatureEvidence) -> str:
    """Why a result is kept off the features track, in words: each missing feature with the
    instructions looked for and where, then what was found instead ('' when nothing is missing)."""
    if not evidence.missing:
        return ""
    if evidence.executed_families is not None:
        level, found, column = "executed", evidence.executed_families, 1
    elif evidence.sass_families:
        level, found, column = "in the SASS", evidence.sass_families, 1
    else:
        level, found, column = "in the PTX", evidence.ptx_families, 0
    parts = [f"{feature} (no {'/'.join(FEATURES.get(feature, ((), ()))[column]) or feature} {level})"
             for feature in evidence.missing]
    seen = (
        ", ".join(f"{name} {count:,}" for name, count in sorted(found.items()) if count)
        or "none of the families"
    )
    return f"missing {' and '.join(parts)} on {evidence.arch}; found {seen}"
