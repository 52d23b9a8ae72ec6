// gemm_bf16 with warp-level tensor cores: mma.sync.m16n8k16 (bf16 in, fp32 accumulate) fed by
// ldmatrix from shared memory, tiles brought in by cp.async (4-stage pipeline).
// C(M,N) = A(M,K) @ B(N,K)^T, all row-major bf16. Both operands are K-contiguous, which is exactly
// mma.sync's "row.col" layout, so no transpose is needed anywhere.
//
// Block tile 128x128x32, 8 warps (2 along M x 4 along N), each warp 64x32 = 4x4 mma tiles.
// Rows of the shared tiles are padded to 40 elements (80 bytes) so the 8 row addresses of an
// ldmatrix land in distinct banks. Any M, N, K works: rows/columns past the edge are zero-filled
// (cp.async with src-size 0) and the epilogue is bounds-checked; when K % 8 != 0 or a pointer is
// not 16-byte aligned the tiles are loaded element by element instead.
//
// Build the PTX beside it:  nvcc -ptx -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 \
//     gemm_bf16_mma.cu -o gemm_bf16_mma.ptx   (then prepend the launch block below)
//
// solboard-launch:
// entry = "gemm_bf16_mma"
// grid = ["cdiv(N, 128)", "cdiv(M, 128)", 1]
// block = [256, 1, 1]
// dynamic_smem = 81920
// params = [ {kind="ptr", tensor="A"}, {kind="ptr", tensor="B"}, {kind="ptr", tensor="C"}, {kind="u32", axis="M"}, {kind="u32", axis="N"}, {kind="u32", axis="K"} ]

#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int BM = 128, BN = 128, BK = 32, STAGES = 4, THREADS = 256;
constexpr int LDS = BK + 8;                       // padded row length in elements
constexpr int TILE_ELEMS = (BM + BN) * LDS;       // one stage: A tile then B tile

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
    // src-size 0 copies nothing and zero-fills the 16 bytes: out-of-range rows/columns become 0.
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One operand tile (ROWS x BK) of a K-contiguous matrix into shared memory.
template <int ROWS>
__device__ __forceinline__ void load_tile(__nv_bfloat16* dst, const __nv_bfloat16* src, int row0, int rows,
                                          int k0, int K, bool fast) {
    constexpr int CHUNKS = ROWS * BK / 8;         // 16-byte chunks of 8 elements
    for (int c = threadIdx.x; c < CHUNKS; c += THREADS) {
        const int r = c / (BK / 8), col = (c % (BK / 8)) * 8;
        const int gr = row0 + r, gk = k0 + col;
        __nv_bfloat16* d = dst + r * LDS + col;
        if (fast) {
            const bool valid = gr < rows && gk < K;      // K % 8 == 0: a chunk is all in or all out
            const __nv_bfloat16* s = valid ? src + (size_t)gr * K + gk : src;
            cp_async_16(smem_addr(d), s, valid);
        } else {
            for (int j = 0; j < 8; ++j) {
                const bool valid = gr < rows && gk + j < K;
                d[j] = valid ? src[(size_t)gr * K + gk + j] : __float2bfloat16(0.0f);
            }
        }
    }
}

__device__ __forceinline__ void store_pair(__nv_bfloat16* C, int M, int N, int row, int col, float x, float y) {
    if (row >= M) return;
    __nv_bfloat16* p = C + (size_t)row * N + col;
    if (col + 1 < N && (N % 2 == 0)) {
        *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
    } else {
        if (col < N) p[0] = __float2bfloat16(x);
        if (col + 1 < N) p[1] = __float2bfloat16(y);
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_bf16_mma(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
              __nv_bfloat16* __restrict__ C, unsigned M, unsigned N, unsigned K) {
    extern __shared__ __align__(128) __nv_bfloat16 smem[];
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
    const bool fast = (K % 8 == 0) && ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B)) % 16 == 0);
    const int num_k = (K + BK - 1) / BK;

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    auto load_stage = [&](int kt) {
        __nv_bfloat16* stage = smem + (kt % STAGES) * TILE_ELEMS;
        load_tile<BM>(stage, A, m0, M, kt * BK, K, fast);
        load_tile<BN>(stage + BM * LDS, B, n0, N, kt * BK, K, fast);
    };

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < num_k) load_stage(s);
        cp_async_commit();
    }

    for (int kt = 0; kt < num_k; ++kt) {
        cp_async_wait<STAGES - 2>();   // tile kt has landed (for this thread's copies)...
        __syncthreads();               // ...and everyone's; everyone is also done with tile kt-1
        if (kt + STAGES - 1 < num_k) load_stage(kt + STAGES - 1);
        cp_async_commit();

        const __nv_bfloat16* a_tile = smem + (kt % STAGES) * TILE_ELEMS;
        const __nv_bfloat16* b_tile = a_tile + BM * LDS;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t a[4][4], b[2][4];
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
                ldmatrix_x4(a[mi], smem_addr(a_tile + (wm + mi * 16 + lane % 16) * LDS + kk + (lane / 16) * 8));
#pragma unroll
            for (int nj = 0; nj < 2; ++nj)
                ldmatrix_x4(b[nj], smem_addr(b_tile + (wn + nj * 16 + lane % 8 + (lane / 16) * 8) * LDS + kk +
                                             ((lane / 8) % 2) * 8));
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
#pragma unroll
                for (int ni = 0; ni < 4; ++ni)
                    mma_bf16(acc[mi][ni], a[mi], b[ni / 2][(ni % 2) * 2], b[ni / 2][(ni % 2) * 2 + 1]);
        }
    }
    cp_async_wait<0>();

#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
            const int row = m0 + wm + mi * 16 + lane / 4;
            const int col = n0 + wn + ni * 8 + (lane % 4) * 2;
            store_pair(C, M, N, row, col, acc[mi][ni][0], acc[mi][ni][1]);
            store_pair(C, M, N, row + 8, col, acc[mi][ni][2], acc[mi][ni][3]);
        }
}
