"""paged_decode_attention inputs, reference (fp64, one sequence at a time) and baseline.

Sequence b has seq_lens[b] cached tokens; its token i sits in slot i % 16 of cache block
block_table[b, i // 16], in k_cache and v_cache (num_blocks, 16, Hkv, 128). Its one query q[b]
(Hq, 128) attends to all of them, without a mask: query head h reads KV head h // (Hq / Hkv) (GQA,
Llama's repeat_kv), scores scaled by 1/sqrt(128). out[b, h] = softmax(scores) @ V.

Baseline (version 2): the cached tokens gathered into packed K and V (one index_select each, slots
computed on the device: no host sync), then FlashAttention-2's variable-length forward
(aten._flash_attention_forward with cumulative lengths, GQA native) on CUDA; on the CPU, which
has no flash kernel, SDPA per sequence.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from evaluator.problems import _attention
from evaluator.problems._sampling import derived_seed, draw
from evaluator.problems.paged_decode_attention.counts import BLOCK_SIZE, HEAD_DIM

DISTRIBUTIONS = _attention.DISTRIBUTIONS
#: Slots that hold no token of a sequence (the tail of its last block, blocks of no sequence) hold
#: values this many times larger: a kernel that reads past seq_lens[b] is far off, not slightly.
GARBAGE_GAIN = 16.0


def sequence_lengths(axes: dict[str, int], seed: int) -> list[int]:
    """B ragged lengths in 1..S summing to T, from the seed alone (the same under every
    distribution and on every device): skewed shares of T - B, capped at S, the rest spread."""
    b, s, t = axes["B"], axes["S"], axes["T"]
    if not b <= t <= b * s:
        raise ValueError(f"T={t} must lie between B={b} and B*S={b * s}")
    gen = torch.Generator().manual_seed(derived_seed(seed, "seq_lens", axes, "seq_lens"))
    weights = torch.rand(b, generator=gen, dtype=torch.float64).pow(2).add(0.05)
    lengths = [min(s, 1 + int(share)) for share in (weights / weights.sum() * (t - b)).tolist()]
    order = torch.randperm(b, generator=gen).tolist()
    while (missing := t - sum(lengths)) > 0:
        for index in order:
            extra = min(s - lengths[index], missing)
            lengths[index] += extra
            missing -= extra
    return lengths


def page_tables(axes: dict[str, int], seed: int, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(block_table (B, S/16) int32, used (num_blocks,) bool). Each sequence gets its blocks from
    a seeded permutation of the pool; entries past a sequence's last block are seeded block
    numbers too (in range, belonging to anyone): a kernel must stop at seq_lens[b]."""
    b, s, blocks = axes["B"], axes["S"], axes["NB"]
    if s % BLOCK_SIZE:
        raise ValueError(f"S={s} must be a multiple of the block size {BLOCK_SIZE}")
    needed = [-(-length // BLOCK_SIZE) for length in lengths]
    if sum(needed) > blocks:
        raise ValueError(f"NB={blocks} blocks cannot hold {sum(needed)} blocks of tokens")
    gen = torch.Generator().manual_seed(derived_seed(seed, "block_table", axes, "block_table"))
    pool = torch.randperm(blocks, generator=gen)
    table = torch.randint(0, blocks, (b, s // BLOCK_SIZE), generator=gen)
    start = 0
    for row, count in enumerate(needed):
        table[row, :count] = pool[start : start + count]
        start += count
    used = torch.zeros(blocks, dtype=torch.bool)
    used[pool[:start]] = True
    return table.to(torch.int32), used


def _slots_in_use(lengths: list[int], table: torch.Tensor, blocks: int) -> torch.Tensor:
    """(num_blocks, 16) bool: which cache slots hold a token of some sequence."""
    in_use = torch.zeros((blocks, BLOCK_SIZE), dtype=torch.bool)
    for row, length in enumerate(lengths):
        positions = torch.arange(length)
        in_use[table[row, positions // BLOCK_SIZE].long(), positions % BLOCK_SIZE] = True
    return in_use


def generate_inputs(
    axes: dict[str, int], seed: int, device: str | torch.device, distribution: str = "normal"
) -> dict[str, torch.Tensor]:
    b, hq, hkv, blocks = axes["B"], axes["Hq"], axes["Hkv"], axes["NB"]
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"paged_decode_attention has no distribution {distribution!r}")
    if hq % hkv:
        raise ValueError(f"Hq={hq} must be a multiple of Hkv={hkv}")
    sampler = "normal" if distribution == "peaked" else distribution
    q = draw("q", (b, hq, HEAD_DIM), axes, seed, device, distribution, sampler)
    if distribution == "peaked":
        q.mul_(_attention.PEAKED_GAIN)
    lengths = sequence_lengths(axes, seed)
    table, _ = page_tables(axes, seed, lengths)
    in_use = _slots_in_use(lengths, table, blocks).to(device)[:, :, None, None]
    gain = torch.where(in_use, 1.0, GARBAGE_GAIN)  # (NB, 16, 1, 1)
    caches = {}
    for name in ("k_cache", "v_cache"):
        values = draw(name, (blocks, BLOCK_SIZE, hkv, HEAD_DIM), axes, seed, device, distribution, sampler)
        caches[name] = values.mul_(gain).to(torch.bfloat16)
    return {
        "q": q.to(torch.bfloat16),
        "k_cache": caches["k_cache"],
        "v_cache": caches["v_cache"],
        "block_table": table.to(device),
        "seq_lens": torch.tensor(lengths, dtype=torch.int32, device=device),
    }


def _gathered(cache: torch.Tensor, table_row: torch.Tensor, length: int) -> torch.Tensor:
    """(length, Hkv, D): one sequence's cached tokens in order."""
    blocks = table_row[: -(-length // BLOCK_SIZE)].long()
    return cache[blocks].flatten(0, 1)[:length]


def reference(inputs: dict[str, torch.Tensor], axes: dict[str, int]) -> dict[str, torch.Tensor]:
    """fp64, one sequence at a time (its K and V are at most S x Hkv x 128)."""
    q = inputs["q"].double()
    hq, d = q.shape[1], q.shape[2]
    hkv = axes["Hkv"]
    out = torch.empty_like(q)
    for row, length in enumerate(inputs["seq_lens"].tolist()):
        table_row = inputs["block_table"][row]
        k = _gathered(inputs["k_cache"], table_row, length).double()  # (L, Hkv, D)
        v = _gathered(inputs["v_cache"], table_row, length).double()
        grouped = q[row].view(hkv, hq // hkv, d)
        scores = torch.einsum("hgd,lhd->hgl", grouped, k) / math.sqrt(d)
        probs = torch.softmax(scores, dim=-1)
        out[row] = torch.einsum("hgl,lhd->hgd", probs, v).reshape(hq, d)
    return {"out": out}


def _packed_slots(
    block_table: torch.Tensor, seq_lens: torch.Tensor, capacity: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(slot of every cached token in sequence order, then filler up to `capacity` entries;
    cumulative lengths int32 (B+1,)), without reading seq_lens on the host: `capacity` is any
    bound on the total known from the shapes, and the positions past the total point at a slot
    of the last sequence's table row (read, never attended to)."""
    device = block_table.device
    rows, pages = block_table.shape
    cumulative = torch.zeros(rows + 1, dtype=torch.int64, device=device)
    torch.cumsum(seq_lens.long(), dim=0, out=cumulative[1:])
    packed = torch.arange(capacity, device=device)
    sequence = torch.searchsorted(cumulative[1:], packed, right=True).clamp_(max=rows - 1)
    position = (packed - cumulative[sequence]).clamp_(0, pages * BLOCK_SIZE - 1)
    blocks = block_table[sequence, position // BLOCK_SIZE].long()
    return blocks * BLOCK_SIZE + position % BLOCK_SIZE, cumulative.to(torch.int32)


def baseline(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    out: torch.Tensor,
) -> None:
    # Version 2: no host read of seq_lens (version 1's seq_lens.tolist() waited for the device on
    # every call, so the launches behind it ran one by one on an idle GPU). The packed K and V hold
    # min(B x S, NB x 16) tokens, a bound on the total from the shapes alone (NB x 16 is the
    # total plus the pool's spare pages, ~0.2-3% more), and FlashAttention is told S, the
    # longest a sequence may be, for its longest key length.
    rows, pages = block_table.shape
    longest = pages * BLOCK_SIZE
    capacity = min(rows * longest, k_cache.shape[0] * BLOCK_SIZE)
    slots, cumulative = _packed_slots(block_table, seq_lens, capacity)
    hkv, d = k_cache.shape[2], k_cache.shape[3]
    k = k_cache.view(-1, hkv, d).index_select(0, slots)  # (capacity, Hkv, D)
    v = v_cache.view(-1, hkv, d).index_select(0, slots)
    if q.device.type == "cuda":
        queries = torch.arange(rows + 1, dtype=torch.int32, device=q.device)
        result = torch.ops.aten._flash_attention_forward(
            q, k, v, queries, cumulative, 1, longest, 0.0, False, False
        )
        out.copy_(result[0])
        return
    bounds = cumulative.tolist()
    for row in range(rows):
        keys = k[bounds[row] : bounds[row + 1]].transpose(0, 1)[None]  # (1, Hkv, L, D)
        values = v[bounds[row] : bounds[row + 1]].transpose(0, 1)[None]
        result = F.scaled_dot_product_attention(q[row][None, :, None], keys, values, enable_gqa=True)
        out[row] = result[0, :, 0]
