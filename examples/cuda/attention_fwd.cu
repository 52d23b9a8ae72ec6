// attention_fwd in plain CUDA C++ with warp-level tensor cores (mma.sync m16n8k16, bf16 in, fp32
// accumulate), FlashAttention-2's loop: no wgmma, no TMA, so on sm_90a it is ranked on the main
// track but not on the features track (the problem requires wgmma + TMA there).
// O (B, H, S, 128) bf16 = softmax(q k^T * softmax_scale) v, LSE (B, H, S) fp32, natural log.
//
// One block of 128 threads per 64 queries of one (batch, head); warp w owns query rows
// 16w .. 16w+15. Q, then each tile of 64 keys and values, are copied into shared memory (rows
// padded to 136 elements so ldmatrix's 8 row addresses fall in distinct banks; rows past S are
// zeros). S = Q K^T by mma.sync from ldmatrix fragments, online softmax in fp32 registers, then
// O += P V with P taken straight from the score registers and V by ldmatrix.trans.
// causal = 1: key j is masked for query i when j > i, and tiles wholly above the diagonal are skipped.
//
// solboard-launch:
// entry = "attention_fwd_mma"
// grid = ["cdiv(S, 64)", "B * H", 1]
// block = [128, 1, 1]
// dynamic_smem = 52224
// params = [ {kind="ptr", tensor="q"}, {kind="ptr", tensor="k"}, {kind="ptr", tensor="v"}, {kind="ptr", tensor="O"}, {kind="ptr", tensor="LSE"}, {kind="u32", axis="H"}, {kind="u32", axis="S"}, {kind="u32", axis="causal"}, {kind="f32", constant="softmax_scale"} ]

#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int BM = 64, BN = 64, HEAD_DIM = 128, THREADS = 128;
constexpr int LDS = HEAD_DIM + 8;  // padded row, in elements
constexpr int TILE = BM * LDS;     // elements of one 64-row tile
constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
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

// 64 rows x 128 columns from a (S, 128) head into a padded tile; rows at or past S are zeros.
__device__ __forceinline__ void load_tile(__nv_bfloat16* dst, const __nv_bfloat16* head, int row0, int S) {
    for (int c = threadIdx.x; c < BM * HEAD_DIM / 8; c += THREADS) {
        const int r = c / (HEAD_DIM / 8), col = (c % (HEAD_DIM / 8)) * 8;
        uint4 value = make_uint4(0, 0, 0, 0);
        if (row0 + r < S) value = *reinterpret_cast<const uint4*>(head + (size_t)(row0 + r) * HEAD_DIM + col);
        *reinterpret_cast<uint4*>(dst + r * LDS + col) = value;
    }
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

// s(16 x 64) = Q rows of this warp (16 x 128) times the key tile (64 x 128)^T.
__device__ __forceinline__ void scores(float (&s)[32], const __nv_bfloat16* q_tile, const __nv_bfloat16* k_tile) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM; kk += 16) {
        uint32_t a[4];
        ldmatrix_x4(a, smem_addr(q_tile + (warp * 16 + lane % 16) * LDS + kk + (lane / 16) * 8));
#pragma unroll
        for (int nj = 0; nj < 4; ++nj) {  // keys 16nj .. 16nj+15: two n8 tiles
            uint32_t b[4];
            ldmatrix_x4(b, smem_addr(k_tile + (nj * 16 + lane % 8 + (lane / 16) * 8) * LDS + kk + ((lane / 8) % 2) * 8));
            float(&lo)[4] = *reinterpret_cast<float(*)[4]>(&s[8 * nj]);
            float(&hi)[4] = *reinterpret_cast<float(*)[4]>(&s[8 * nj + 4]);
            mma_bf16(lo, a, b[0], b[1]);
            mma_bf16(hi, a, b[2], b[3]);
        }
    }
}

// o(16 x 128) += P(16 x 64) V(64 x 128) for this warp: P from the score registers (the m16n8
// accumulator layout is the m16n8k16 A layout two n8 tiles at a time), V by ldmatrix.trans.
__device__ __forceinline__ void accumulate_pv(const float (&p)[32], float (&o)[16][4], const __nv_bfloat16* v_tile) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
        const uint32_t a[4] = {pack_bf16(p[8 * ks], p[8 * ks + 1]), pack_bf16(p[8 * ks + 2], p[8 * ks + 3]),
                               pack_bf16(p[8 * ks + 4], p[8 * ks + 5]), pack_bf16(p[8 * ks + 6], p[8 * ks + 7])};
        const int key = ks * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
#pragma unroll
        for (int dn = 0; dn < 8; ++dn) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, smem_addr(v_tile + key * LDS + dn * 16 + (lane / 16) * 8));
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

extern "C" __global__ void __launch_bounds__(THREADS)
attention_fwd_mma(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                  const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ O, float* __restrict__ LSE,
                  unsigned H, unsigned S, unsigned causal, float softmax_scale) {
    extern __shared__ __align__(16) __nv_bfloat16 smem[];
    __nv_bfloat16 *q_tile = smem, *k_tile = smem + TILE, *v_tile = smem + 2 * TILE;
    const int q0 = blockIdx.x * BM;
    const size_t head = blockIdx.y, offset = head * S * HEAD_DIM;
    const int tiles = (S + BN - 1) / BN;
    const int kv_tiles = causal ? min(tiles, (q0 + BM - 1) / BN + 1) : tiles;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int query = q0 + warp * 16 + lane / 4;  // row half 0; half 1 is query + 8
    const float scale_log2 = softmax_scale * LOG2E;

    load_tile(q_tile, q + offset, q0, S);
    float o[16][4];
#pragma unroll
    for (int j = 0; j < 16; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    RowState rows[2];
    for (int j = 0; j < kv_tiles; ++j) {
        __syncthreads();  // everyone is done with the previous tile
        load_tile(k_tile, k + offset, j * BN, S);
        load_tile(v_tile, v + offset, j * BN, S);
        __syncthreads();
        float s[32];
        scores(s, q_tile, k_tile);
        softmax_rows(s, o, rows[0], 0, query, j * BN, S, causal, scale_log2);
        softmax_rows(s, o, rows[1], 1, query + 8, j * BN, S, causal, scale_log2);
        accumulate_pv(s, o, v_tile);
    }
    store_row(O, LSE, o, rows[0], 0, query, S, head);
    store_row(O, LSE, o, rows[1], 1, query + 8, S, head);
}
