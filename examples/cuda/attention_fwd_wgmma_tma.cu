// attention_fwd with Hopper's instructions: Q K^T by wgmma.mma_async (warpgroup MMA, both operands
// in shared memory) on tiles that TMA brings in, online softmax in registers, then P V by
// mma.sync (P stays in registers as the A operand; V is read from the swizzled tile with
// ldmatrix.trans). O (B, H, S, 128) bf16 and LSE (B, H, S) fp32, natural log.
//
// One block of 128 threads (one warpgroup) per 64 queries of one (batch, head): warp w owns query
// rows 16w .. 16w+15. Thread 0 drives TMA: the Q tile once, then K and V tiles of 64 keys into two
// stages (mbarrier per stage), the next-but-one tile issued as soon as a stage is free, so a load
// overlaps the tile being computed. Every tile is 64 rows x 128 columns, brought in as two boxes of
// 64 columns (128 bytes: one 128-byte swizzle span); the descriptors and the swizzle are those of
// examples/ptx/gemm_bf16_wgmma_tma.cu (verified on an H200): 8 k16 steps cover the head dim.
// The tensor maps are 4-D (D, S, H, B), so a tile never reads past its own head: keys and queries
// beyond S come back as zeros and are masked (keys) or not stored (queries).
// causal = 1: key j is masked for query i when j > i, and tiles wholly above the diagonal are skipped.
//
// solboard-launch:
// entry = "attention_fwd_wgmma_tma"
// grid = ["cdiv(S, 64)", "B * H", 1]
// block = [128, 1, 1]
// dynamic_smem = 82944
// params = [ {kind="tensormap", tensor="q", box=[64, 64, 1, 1], swizzle="128B", l2_promotion="256B"}, {kind="tensormap", tensor="k", box=[64, 64, 1, 1], swizzle="128B", l2_promotion="256B"}, {kind="tensormap", tensor="v", box=[64, 64, 1, 1], swizzle="128B", l2_promotion="256B"}, {kind="ptr", tensor="O"}, {kind="ptr", tensor="LSE"}, {kind="u32", axis="H"}, {kind="u32", axis="S"}, {kind="u32", axis="causal"}, {kind="f32", constant="softmax_scale"} ]

#include <cuda.h>
#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int BM = 64, BN = 64, HEAD_DIM = 128, THREADS = 128;
constexpr uint32_t BOX_BYTES = 64 * 64 * 2;             // 64 rows x 64 columns of bf16, 128-byte rows
constexpr uint32_t TILE_BYTES = 2 * BOX_BYTES;           // 64 rows x 128 columns
constexpr uint32_t Q_OFFSET = 0, STAGE0 = TILE_BYTES;    // then K and V of stage s at STAGE0 + s * 2 tiles
constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}

// One box of a 4-D (D, S, H, B) tensor map: coordinates innermost first.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int d, int s, int h,
                                            int b) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n"
        ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(d), "r"(s), "r"(h), "r"(b) : "memory");
}

// A 64 x 128 tile as two boxes of 64 columns.
__device__ __forceinline__ void tma_load_tile(uint32_t dst, const CUtensorMap* map, uint32_t bar, int row, int h,
                                              int b) {
    tma_load_4d(dst, map, bar, 0, row, h, b);
    tma_load_4d(dst + BOX_BYTES, map, bar, 64, row, h, b);
}

// Shared-memory matrix descriptor: K-major tile, 128-byte swizzle, 8-row groups 1024 bytes apart.
__device__ __forceinline__ uint64_t make_desc(uint32_t addr) {
    uint64_t desc = (uint64_t)((addr & 0x3FFFF) >> 4);
    desc |= (uint64_t)1 << 16;              // leading byte offset (unused with this swizzle)
    desc |= (uint64_t)(1024 >> 4) << 32;    // stride byte offset: 8 rows x 128 bytes
    desc |= (uint64_t)1 << 62;              // layout: 128-byte swizzle
    return desc;
}

// Byte offset of element (row, col) in a tile of two swizzled boxes: the 16-byte chunk index
// within a 128-byte row is XORed with the row's position in its group of 8 (TMA's 128B swizzle).
__device__ __forceinline__ uint32_t swizzled(int row, int col) {
    const int box = col / 64, chunk = (col % 64) / 8;
    return box * BOX_BYTES + row * 128 + ((chunk ^ (row % 8)) * 16) + (col % 8) * 2;
}

__device__ __forceinline__ void fence_accumulators(float (&d)[32]) {
#pragma unroll
    for (int i = 0; i < 32; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

__device__ __forceinline__ void wgmma_m64n64k16_bf16(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

struct RowState {  // one query row: running max (log2 units), this thread's share of the sum
    float max = -INFINITY, sum = 0.0f;
};

// Scores of one row half (2 of 4 values per n8 tile) -> probabilities, rescaling o and the sum.
// half 0: row g (s[4j], s[4j+1]); half 1: row g + 8 (s[4j+2], s[4j+3]).
__device__ __forceinline__ void softmax_rows(float (&s)[32], float (&o)[16][4], RowState& row, int half, int query,
                                             int k0, int S, bool causal, float scale_log2) {
    const int lane = threadIdx.x % 32;
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int key = k0 + 8 * j + 2 * (lane % 4) + e;
            const bool valid = key < S && (!causal || key <= query);
            float& x = s[4 * j + 2 * half + e];
            x = valid ? x * scale_log2 : -INFINITY;
            tile_max = fmaxf(tile_max, x);
        }
    const float new_max = fmaxf(row.max, quad_max(tile_max));
    const float base = new_max == -INFINITY ? 0.0f : new_max;  // a row with nothing seen yet
    const float alpha = exp2f(row.max - base);
    row.max = new_max;
    row.sum *= alpha;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        o[j][2 * half] *= alpha;
        o[j][2 * half + 1] *= alpha;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            float& x = s[4 * j + 2 * half + e];
            x = exp2f(x - base);
            row.sum += x;
        }
}

// o(16 x 128) += P(16 x 64) V(64 x 128) for this warp: P from the score registers (the m16n8
// accumulator layout is the m16n8k16 A layout two n8 tiles at a time), V by ldmatrix.trans.
__device__ __forceinline__ void accumulate_pv(const float (&p)[32], float (&o)[16][4], uint32_t v_tile) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
        const uint32_t a[4] = {pack_bf16(p[8 * ks], p[8 * ks + 1]), pack_bf16(p[8 * ks + 2], p[8 * ks + 3]),
                               pack_bf16(p[8 * ks + 4], p[8 * ks + 5]), pack_bf16(p[8 * ks + 6], p[8 * ks + 7])};
        const int key = ks * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
#pragma unroll
        for (int dn = 0; dn < 8; ++dn) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, v_tile + swizzled(key, dn * 16 + (lane / 16) * 8));
            mma_bf16(o[2 * dn], a, b[0], b[1]);
            mma_bf16(o[2 * dn + 1], a, b[2], b[3]);
        }
    }
}

__device__ __forceinline__ void store_row(__nv_bfloat16* O, float* LSE, const float (&o)[16][4], const RowState& row,
                                          int half, int query, int S, size_t head) {
    const int lane = threadIdx.x % 32;
    const float sum = quad_sum(row.sum);
    if (query >= S) return;
    const float inv = 1.0f / sum;
    __nv_bfloat16* out = O + (head * S + query) * HEAD_DIM;
#pragma unroll
    for (int j = 0; j < 16; ++j)
        *reinterpret_cast<__nv_bfloat162*>(out + 8 * j + 2 * (lane % 4)) =
            __floats2bfloat162_rn(o[j][2 * half] * inv, o[j][2 * half + 1] * inv);
    if (lane % 4 == 0) LSE[head * S + query] = row.max * LN2 + logf(sum);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS, 1)
attention_fwd_wgmma_tma(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                        const __grid_constant__ CUtensorMap map_v, __nv_bfloat16* __restrict__ O,
                        float* __restrict__ LSE, unsigned H, unsigned S, unsigned causal, float softmax_scale) {
    __shared__ __align__(8) uint64_t q_bar, kv_bar[2];
    extern __shared__ uint8_t smem_raw[];
    const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;  // swizzle atoms are 1024 bytes
    const int q0 = blockIdx.x * BM, head = blockIdx.y, h = head % H, b = head / H;
    const int tiles = (S + BN - 1) / BN;
    const int kv_tiles = causal ? min(tiles, (q0 + BM - 1) / BN + 1) : tiles;
    auto load_kv = [&](int j) {
        const uint32_t stage = base + STAGE0 + (j % 2) * 2 * TILE_BYTES, bar = smem_addr(&kv_bar[j % 2]);
        mbar_expect_tx(bar, 2 * TILE_BYTES);
        tma_load_tile(stage, &map_k, bar, j * BN, h, b);
        tma_load_tile(stage + TILE_BYTES, &map_v, bar, j * BN, h, b);
    };

    if (threadIdx.x == 0) {
        mbar_init(smem_addr(&q_bar), 1);
        mbar_init(smem_addr(&kv_bar[0]), 1);
        mbar_init(smem_addr(&kv_bar[1]), 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_expect_tx(smem_addr(&q_bar), TILE_BYTES);
        tma_load_tile(base + Q_OFFSET, &map_q, smem_addr(&q_bar), q0, h, b);
        load_kv(0);
        if (kv_tiles > 1) load_kv(1);
    }

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int query = q0 + warp * 16 + lane / 4;  // row half 0; half 1 is query + 8
    const float scale_log2 = softmax_scale * LOG2E;
    float o[16][4];
#pragma unroll
    for (int j = 0; j < 16; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    RowState rows[2];
    mbar_wait(smem_addr(&q_bar), 0);

    for (int j = 0; j < kv_tiles; ++j) {
        const uint32_t k_tile = base + STAGE0 + (j % 2) * 2 * TILE_BYTES, v_tile = k_tile + TILE_BYTES;
        mbar_wait(smem_addr(&kv_bar[j % 2]), (j / 2) & 1);
        float s[32];
#pragma unroll
        for (int i = 0; i < 32; ++i) s[i] = 0.0f;
        fence_accumulators(s);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {  // box kk/4, +32 bytes per k16 step inside it
            const uint32_t offset = (kk / 4) * BOX_BYTES + (kk % 4) * 32;
            wgmma_m64n64k16_bf16(s, make_desc(base + Q_OFFSET + offset), make_desc(k_tile + offset), 1);
        }
        wgmma_commit();
        wgmma_wait_all();
        fence_accumulators(s);
        softmax_rows(s, o, rows[0], 0, query, j * BN, S, causal, scale_log2);
        softmax_rows(s, o, rows[1], 1, query + 8, j * BN, S, causal, scale_log2);
        accumulate_pv(s, o, v_tile);
        __syncthreads();  // every thread is done with this stage (wgmma reads and ldmatrix reads)
        if (threadIdx.x == 0 && j + 2 < kv_tiles) {
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            load_kv(j + 2);
        }
    }
    store_row(O, LSE, o, rows[0], 0, query, S, head);
    store_row(O, LSE, o, rows[1], 1, query + 8, S, head);
}
