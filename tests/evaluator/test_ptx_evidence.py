"""Architecture-feature evidence: PTX families, SASS families of the ptxas cubin, executed counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.ptx import validate_upload
from evaluator.ptx.feature_evidence import (
    executed_opcodes_from_raw_csv,
    families_from_opcodes,
    parse_opcode_instances,
    ptx_families,
    sass_opcodes,
    with_executed,
)
from evaluator.ptx.toolchain import find_tool

ROOT = Path(__file__).resolve().parents[2]
needs_sass = pytest.mark.skipif(
    find_tool("ptxas") is None or find_tool("cuobjdump") is None or find_tool("nvdisasm") is None,
    reason="ptxas/cuobjdump/nvdisasm are not installed",
)


def evidence_of(path: str):  # type: ignore[no-untyped-def]
    result = validate_upload("ptx", (ROOT / path).read_text(), None, "gemm_bf16", ["sm_90a"])
    assert result.ok, result.messages()
    return result.archs[0].evidence


@needs_sass
def test_the_wgmma_example_shows_wgmma_and_tma_in_ptx_and_sass() -> None:
    evidence = evidence_of("examples/ptx/gemm_bf16_wgmma_tma.ptx")
    assert evidence.ptx_families["wgmma.mma_async"] > 0 and evidence.ptx_families["cp.async.bulk.tensor"] > 0
    assert evidence.sass_families["HGMMA"] > 0 and evidence.sass_families["UTMALDG"] > 0
    assert evidence.required == ["wgmma", "tma"] and evidence.missing == []


@needs_sass
def test_the_mma_example_shows_mma_sync_and_misses_the_hopper_features() -> None:
    evidence = evidence_of("examples/ptx/gemm_bf16_mma.ptx")
    assert evidence.ptx_families["mma.sync"] > 0 and evidence.ptx_families["ldmatrix"] > 0
    assert evidence.sass_families["HMMA"] > 0 and evidence.sass_families["LDSM"] > 0
    assert "HGMMA" not in evidence.sass_families
    assert evidence.missing == ["wgmma", "tma"]


def test_ptx_families_ignore_comments_and_tell_mma_from_wgmma() -> None:
    ptx = "// wgmma.mma_async in a comment\n/* cp.async.bulk.tensor */\nmma.sync.aligned.m16n8k16 ...;\n"
    assert ptx_families(ptx) == {"mma.sync": 1}


def test_sass_rows_are_counted_by_opcode_even_when_predicated() -> None:
    sass = (
        "        /*0c00*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR12], R24, gsb0 ;\n"
        "        /*7200*/              @!P0 UTMALDG.2D [UR4], [UR10] ;\n"
        "  .headerflags HGMMA in metadata is not an instruction\n"
    )
    assert sass_opcodes(sass) == {"HGMMA": 1, "UTMALDG": 1}
    assert families_from_opcodes({"UTCHMMA": 2, "UTCBAR": 1, "LDTM": 3}) == {"UTC*": 3, "LDTM/STTM": 3}


def test_executed_counts_decide_when_present() -> None:
    evidence = evidence_of("examples/ptx/gemm_bf16_wgmma_tma.ptx") if find_tool("ptxas") else None
    if evidence is None:
        pytest.skip("ptxas is not installed")
    never_ran = with_executed(evidence, {"HMMA": 100, "UTMALDG": 64})
    assert never_ran.evidence_level == "executed" and never_ran.missing == ["wgmma"]
    ran = with_executed(evidence, {"HGMMA": 4096, "UTMALDG": 64})
    assert ran.missing == [] and ran.executed_families == {"HGMMA": 4096, "UTMALDG": 64}


def test_executed_opcode_counts_are_read_from_ncus_raw_page() -> None:
    raw = (
        '"ID","Kernel Name","Block Size","sass__inst_executed_per_opcode","gpu__time_duration.sum"\n'
        '"","","","inst","nsecond"\n'
        '"0","gemm_bf16_wgmma_tma","(288, 1, 1)",'
        '"580,032 (HGMMA: 16,384; UTMALDG: 512; IMAD: 83,872)","27,104"\n'
    )
    counts = executed_opcodes_from_raw_csv(raw)
    assert counts == {"gemm_bf16_wgmma_tma": {"HGMMA": 16384, "UTMALDG": 512, "IMAD": 83872}}
    assert families_from_opcodes(counts["gemm_bf16_wgmma_tma"]) == {"HGMMA": 16384, "UTMALDG": 512}


def test_opcode_modifiers_fold_into_the_base_opcode() -> None:
    assert parse_opcode_instances("(HGMMA.64x256x16.F32.BF16: 16,384; HGMMA.64x128x16.F32.BF16: 8)") == {
        "HGMMA": 16392
    }
