// gemm_fp8 in plain CUDA C++ with warp-level tensor cores: C = scale_a * scale_b * A @ B^T, A (M, K)
// and B (N, K) e4m3 row-major (the TN layout), C (M, N) bf16. No wgmma, no TMA: on sm_90a it is
// ranked on the main track but not on the features track (the problem requires wgmma + TMA there).
//
// Every e4m3 value is exactly an fp16 value (3 mantissa bits, exponents 2^-9 .. 2^8), so tiles are
// converted to fp16 on their way into shared memory and multiplied by mma.sync m16n8k16 (fp16 in,
// fp32 accumulate): the products and their fp32 sums are as exact as an fp32 GEMM's. Block tile
// 128 x 128 x 32, 8 warps (2 along M x 4 along N), each warp 64 x 32 = 4 x 4 mma tiles, operands by
// ldmatrix from rows padded to 40 elements (the 8 row addresses of an ldmatrix in distinct banks).
// Rows, columns and K past the edges are zeros; the epilogue is bounds-checked, so any M, N, K work.
//
// solboard-launch:
// entry = "gemm_fp8_mma"
// grid = ["cdiv(N, 128)", "cdiv(M, 128)", 1]
// block = [256, 1, 1]
// dynamic_smem = 20480
// params = [ {kind="ptr", tensor="A"}, {kind="ptr", tensor="B"}, {kind="ptr", tensor="scale_a"}, {kind="ptr", tensor="scale_b"}, {kind="ptr", tensor="C"}, {kind="u32", axis="M"}, {kind="u32", axis="N"}, {kind="u32", axis="K"} ]

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

namespace {

constexpr int BM = 128, BN = 128, BK = 32, THREADS = 256;
constexpr int LDS = BK + 8;  // padded row length in fp16 elements

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t e4m3_pair_to_f16(uint16_t pair) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3);
    return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

__device__ __forceinline__ __half e4m3_to_f16(uint8_t value) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(value), __NV_E4M3);
    return __half(h);
}

// One operand tile (ROWS x BK) of a K-contiguous e4m3 matrix into shared memory as fp16, 8 values
// (8 bytes in, 16 bytes out) per step; zeros outside the matrix.
template <int ROWS>
__device__ __forceinline__ void load_tile(__half* dst, const uint8_t* src, int row0, int rows, int k0, int K,
                                          bool fast) {
    constexpr int CHUNKS = ROWS * BK / 8;
    for (int c = threadIdx.x; c < CHUNKS; c += THREADS) {
        const int r = c / (BK / 8), col = (c % (BK / 8)) * 8;
        const int gr = row0 + r, gk = k0 + col;
        __half* d = dst + r * LDS + col;
        if (fast) {  // K % 8 == 0: a chunk is all in or all out
            uint2 raw = make_uint2(0, 0);
            if (gr < rows && gk < K) raw = *reinterpret_cast<const uint2*>(src + (size_t)gr * K + gk);
            const uint4 halves = make_uint4(e4m3_pair_to_f16(raw.x & 0xffff), e4m3_pair_to_f16(raw.x >> 16),
                                            e4m3_pair_to_f16(raw.y & 0xffff), e4m3_pair_to_f16(raw.y >> 16));
            *reinterpret_cast<uint4*>(d) = halves;
        } else {
            for (int j = 0; j < 8; ++j) {
                const bool valid = gr < rows && gk + j < K;
                d[j] = valid ? e4m3_to_f16(src[(size_t)gr * K + gk + j]) : __float2half(0.0f);
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
gemm_fp8_mma(const uint8_t* __restrict__ A, const uint8_t* __restrict__ B, const float* __restrict__ scale_a,
             const float* __restrict__ scale_b, __nv_bfloat16* __restrict__ C, unsigned M, unsigned N, unsigned K) {
    extern __shared__ __align__(16) __half smem[];
    __half *a_tile = smem, *b_tile = smem + BM * LDS;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
    const bool fast = (K % 8 == 0) && ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B)) % 8 == 0);

    float acc[4][4][4] = {};
    for (int k0 = 0; k0 < (int)K; k0 += BK) {
        __syncthreads();  // everyone is done with the previous tiles
        load_tile<BM>(a_tile, A, m0, M, k0, K, fast);
        load_tile<BN>(b_tile, B, n0, N, k0, K, fast);
        __syncthreads();
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
                    mma_f16(acc[mi][ni], a[mi], b[ni / 2][(ni % 2) * 2], b[ni / 2][(ni % 2) * 2 + 1]);
        }
    }

    const float scale = scale_a[0] * scale_b[0];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
            const int row = m0 + wm + mi * 16 + lane / 4;
            const int col = n0 + wn + ni * 8 + (lane % 4) * 2;
            store_pair(C, M, N, row, col, acc[mi][ni][0] * scale, acc[mi][ni][1] * scale);
            store_pair(C, M, N, row + 8, col, acc[mi][ni][2] * scale, acc[mi][ni][3] * scale);
        }
}
