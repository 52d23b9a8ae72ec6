// attention_bwd in plain CUDA C++ with warp-level tensor cores (mma.sync m16n8k16, bf16 in, fp32
// accumulate): FlashAttention-2's backward in one launch, without atomics or scratch memory.
// Given q, k, v, o, dO (B, H, S, 128) bf16 and lse (B, H, S) fp32 (natural log), writes dq, dk, dv:
//   P = exp(q k^T * scale - lse), dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * o)),
//   dQ = dS K * scale, dK = dS^T Q * scale  (scale = softmax_scale = 1/sqrt(128)).
//
// The grid has two halves. Blocks 0 .. T-1 (T = cdiv(S, 64)) each own 64 keys: K and V stay in
// shared memory while every tile of 64 queries that sees them streams through, and dK, dV
// accumulate in registers. Blocks T .. 2T-1 each own 64 queries: Q and dO stay while every key tile
// they see streams through, and dQ accumulates in registers. Both recompute P from lse (no softmax
// pass), so nothing is shared between blocks and every output element is written exactly once.
// 128 threads per block; warp w owns rows 16w .. 16w+15 of its block's own tile. P and dS are
// rounded to bf16 for the tensor cores, as FlashAttention does. causal = 1: key j is masked for
// query i when j > i, and tiles wholly past the diagonal are skipped.
//
// solboard-launch:
// entry = "attention_bwd_mma"
// grid = ["2 * cdiv(S, 64)", "B * H", 1]
// block = [128, 1, 1]
// dynamic_smem = 70144
// params = [ {kind="ptr", tensor="q"}, {kind="ptr", tensor="k"}, {kind="ptr", tensor="v"}, {kind="ptr", tensor="o"}, {kind="ptr", tensor="dO"}, {kind="ptr", tensor="lse"}, {kind="ptr", tensor="dq"}, {kind="ptr", tensor="dk"}, {kind="ptr", tensor="dv"}, {kind="u32", axis="H"}, {kind="u32", axis="S"}, {kind="u32", axis="causal"}, {kind="f32", constant="softmax_scale"} ]

#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int TILE_ROWS = 64, HEAD_DIM = 128, THREADS = 128;
constexpr int LDS = HEAD_DIM + 8;        // padded row, in elements
constexpr int TILE = TILE_ROWS * LDS;    // elements of one 64-row tile
constexpr float LOG2E = 1.4426950408889634f;

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

// 64 rows x 128 columns from a (S, 128) head into a padded tile; rows at or past S are zeros.
__device__ __forceinline__ void load_tile(__nv_bfloat16* dst, const __nv_bfloat16* head, int row0, int S) {
    for (int c = threadIdx.x; c < TILE_ROWS * HEAD_DIM / 8; c += THREADS) {
        const int r = c / (HEAD_DIM / 8), col = (c % (HEAD_DIM / 8)) * 8;
        uint4 value = make_uint4(0, 0, 0, 0);
        if (row0 + r < S) value = *reinterpret_cast<const uint4*>(head + (size_t)(row0 + r) * HEAD_DIM + col);
        *reinterpret_cast<uint4*>(dst + r * LDS + col) = value;
    }
}

// Per query row of a tile: lse in log2 units and delta = rowsum(dO * o) in fp32 (two threads a row).
// Rows past S get lse = +inf (P = 0) and delta = 0.
__device__ __forceinline__ void load_row_stats(float* lse2, float* delta, const float* lse, const __nv_bfloat16* o,
                                               const __nv_bfloat16* d_out, int row0, int S) {
    const int r = threadIdx.x / 2, half = threadIdx.x % 2, row = row0 + r;
    float sum = 0.0f;
    if (row < S) {
        const __nv_bfloat16* a = o + (size_t)row * HEAD_DIM + half * 64;
        const __nv_bfloat16* b = d_out + (size_t)row * HEAD_DIM + half * 64;
        for (int d = 0; d < 64; ++d) sum += __bfloat162float(a[d]) * __bfloat162float(b[d]);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    if (half == 0) {
        delta[r] = sum;
        lse2[r] = row < S ? lse[row] * LOG2E : INFINITY;
    }
}

// acc(16 x 64) = rows 16w.. of `rows_tile` (16 x 128) times `cols_tile` (64 x 128)^T.
__device__ __forceinline__ void gemm_nt(float (&acc)[32], const __nv_bfloat16* rows_tile,
                                        const __nv_bfloat16* cols_tile) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM; kk += 16) {
        uint32_t a[4];
        ldmatrix_x4(a, smem_addr(rows_tile + (warp * 16 + lane % 16) * LDS + kk + (lane / 16) * 8));
#pragma unroll
        for (int nj = 0; nj < 4; ++nj) {
            uint32_t b[4];
            ldmatrix_x4(b, smem_addr(cols_tile + (nj * 16 + lane % 8 + (lane / 16) * 8) * LDS + kk + ((lane / 8) % 2) * 8));
            float(&lo)[4] = *reinterpret_cast<float(*)[4]>(&acc[8 * nj]);
            float(&hi)[4] = *reinterpret_cast<float(*)[4]>(&acc[8 * nj + 4]);
            mma_bf16(lo, a, b[0], b[1]);
            mma_bf16(hi, a, b[2], b[3]);
        }
    }
}

// out(16 x 128) += X(16 x 64, bf16 A fragments) times `tile` (64 x 128), read with ldmatrix.trans.
__device__ __forceinline__ void gemm_nn(float (&out)[16][4], const uint32_t (&x)[4][4], const __nv_bfloat16* tile) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
        const int row = ks * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
#pragma unroll
        for (int dn = 0; dn < 8; ++dn) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, smem_addr(tile + row * LDS + dn * 16 + (lane / 16) * 8));
            mma_bf16(out[2 * dn], x[ks], b[0], b[1]);
            mma_bf16(out[2 * dn + 1], x[ks], b[2], b[3]);
        }
    }
}

// An m16n8 accumulator tile pair (16 x 64 in fp32) as m16n8k16 A fragments in bf16.
__device__ __forceinline__ void to_fragments(uint32_t (&x)[4][4], const float (&acc)[32]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
        x[ks][0] = pack_bf16(acc[8 * ks], acc[8 * ks + 1]);
        x[ks][1] = pack_bf16(acc[8 * ks + 2], acc[8 * ks + 3]);
        x[ks][2] = pack_bf16(acc[8 * ks + 4], acc[8 * ks + 5]);
        x[ks][3] = pack_bf16(acc[8 * ks + 6], acc[8 * ks + 7]);
    }
}

// Element i of an m16n8 accumulator pair: its row (0..15 within the warp's 16) and column (0..63).
__device__ __forceinline__ int acc_row(int i) { return (threadIdx.x % 32) / 4 + ((i % 4) / 2) * 8; }
__device__ __forceinline__ int acc_col(int i) { return (i / 4) * 8 + 2 * (threadIdx.x % 4) + (i % 2); }

__device__ __forceinline__ void store_rows(__nv_bfloat16* out, const float (&acc)[16][4], float scale, int row0,
                                           int S) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int row = row0 + warp * 16 + lane / 4 + half * 8;
        if (row >= S) continue;
#pragma unroll
        for (int j = 0; j < 16; ++j)
            *reinterpret_cast<__nv_bfloat162*>(out + (size_t)row * HEAD_DIM + 8 * j + 2 * (lane % 4)) =
                __floats2bfloat162_rn(acc[j][2 * half] * scale, acc[j][2 * half + 1] * scale);
    }
}

struct Head {  // the tensors of one (batch, head), offset to it
    const __nv_bfloat16 *q, *k, *v, *o, *d_out;
    const float* lse;
    int S;
    bool causal;
    float scale;
};

// dK and dV of the 64 keys from k0: stream every query tile that sees them.
__device__ void keys_block(const Head& t, __nv_bfloat16* dk, __nv_bfloat16* dv, __nv_bfloat16* smem, float* stats,
                           int k0) {
    __nv_bfloat16 *k_tile = smem, *v_tile = smem + TILE, *q_tile = smem + 2 * TILE, *do_tile = smem + 3 * TILE;
    float *lse2 = stats, *delta = stats + TILE_ROWS;
    const int warp = threadIdx.x / 32, tiles = (t.S + TILE_ROWS - 1) / TILE_ROWS;
    const float scale_log2 = t.scale * LOG2E;
    load_tile(k_tile, t.k, k0, t.S);
    load_tile(v_tile, t.v, k0, t.S);
    float d_key[16][4] = {}, d_value[16][4] = {};
    for (int qt = t.causal ? k0 / TILE_ROWS : 0; qt < tiles; ++qt) {
        const int q0 = qt * TILE_ROWS;
        __syncthreads();  // everyone is done with the previous query tile
        load_tile(q_tile, t.q, q0, t.S);
        load_tile(do_tile, t.d_out, q0, t.S);
        load_row_stats(lse2, delta, t.lse, t.o, t.d_out, q0, t.S);
        __syncthreads();
        float acc[32];
        gemm_nt(acc, k_tile, q_tile);  // S^T: keys x queries
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            const int key = k0 + warp * 16 + acc_row(i), query = acc_col(i);
            const bool seen = !t.causal || key <= q0 + query;
            acc[i] = seen ? exp2f(acc[i] * scale_log2 - lse2[query]) : 0.0f;  // P^T
        }
        uint32_t p[4][4];
        to_fragments(p, acc);
        gemm_nn(d_value, p, do_tile);  // dV += P^T dO
        gemm_nt(acc, v_tile, do_tile);  // dP^T = V dO^T
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            const __nv_bfloat162 pair = *reinterpret_cast<const __nv_bfloat162*>(&p[i / 8][(i % 8) / 2]);
            const float prob = (i % 2) ? __high2float(pair) : __low2float(pair);
            acc[i] = prob * (acc[i] - delta[acc_col(i)]);  // dS^T
        }
        uint32_t ds[4][4];
        to_fragments(ds, acc);
        gemm_nn(d_key, ds, q_tile);  // dK += dS^T Q
    }
    store_rows(dk, d_key, t.scale, k0, t.S);
    store_rows(dv, d_value, 1.0f, k0, t.S);
}

// dQ of the 64 queries from q0: stream every key tile they see.
__device__ void queries_block(const Head& t, __nv_bfloat16* dq, __nv_bfloat16* smem, float* stats, int q0) {
    __nv_bfloat16 *q_tile = smem, *do_tile = smem + TILE, *k_tile = smem + 2 * TILE, *v_tile = smem + 3 * TILE;
    float *lse2 = stats, *delta = stats + TILE_ROWS;
    const int warp = threadIdx.x / 32, tiles = (t.S + TILE_ROWS - 1) / TILE_ROWS;
    const int last = t.causal ? min(tiles, q0 / TILE_ROWS + 1) : tiles;
    const float scale_log2 = t.scale * LOG2E;
    load_tile(q_tile, t.q, q0, t.S);
    load_tile(do_tile, t.d_out, q0, t.S);
    load_row_stats(lse2, delta, t.lse, t.o, t.d_out, q0, t.S);
    float d_query[16][4] = {};
    for (int kt = 0; kt < last; ++kt) {
        const int k0 = kt * TILE_ROWS;
        __syncthreads();
        load_tile(k_tile, t.k, k0, t.S);
        load_tile(v_tile, t.v, k0, t.S);
        __syncthreads();
        float p[32], dp[32];
        gemm_nt(p, q_tile, k_tile);   // S: queries x keys
        gemm_nt(dp, do_tile, v_tile);  // dP = dO V^T
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            const int row = warp * 16 + acc_row(i), key = k0 + acc_col(i);
            const bool seen = key < t.S && (!t.causal || key <= q0 + row);
            const float prob = seen ? exp2f(p[i] * scale_log2 - lse2[row]) : 0.0f;
            const float rounded = __bfloat162float(__float2bfloat16(prob));  // the P the key blocks use
            p[i] = rounded * (dp[i] - delta[row]);  // dS
        }
        uint32_t ds[4][4];
        to_fragments(ds, p);
        gemm_nn(d_query, ds, k_tile);  // dQ += dS K
    }
    store_rows(dq, d_query, t.scale, q0, t.S);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS)
attention_bwd_mma(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                  const __nv_bfloat16* __restrict__ v, const __nv_bfloat16* __restrict__ o,
                  const __nv_bfloat16* __restrict__ dO, const float* __restrict__ lse, __nv_bfloat16* __restrict__ dq,
                  __nv_bfloat16* __restrict__ dk, __nv_bfloat16* __restrict__ dv, unsigned H, unsigned S,
                  unsigned causal, float softmax_scale) {
    extern __shared__ __align__(16) __nv_bfloat16 smem[];
    float* stats = reinterpret_cast<float*>(smem + 4 * TILE);
    const size_t head = blockIdx.y, offset = head * S * HEAD_DIM;
    const Head t{q + offset, k + offset, v + offset, o + offset, dO + offset, lse + head * S, (int)S, causal != 0,
                 softmax_scale};
    const int tiles = (S + TILE_ROWS - 1) / TILE_ROWS;
    if ((int)blockIdx.x < tiles)
        keys_block(t, dk + offset, dv + offset, smem, stats, blockIdx.x * TILE_ROWS);
    else
        queries_block(t, dq + offset, smem, stats, (blockIdx.x - tiles) * TILE_ROWS);
}
