// gemm_fp8 on Hopper's own path: fp8 (e4m3) wgmma.mma_async fed by TMA through a 4-stage mbarrier
// pipeline. C(M,N) = scale_a * scale_b * A(M,K) @ B(N,K)^T, A and B row-major e4m3 (the TN layout),
// fp32 accumulation, bf16 out.
//
// Block tile 128 (M) x 128 (N) x 128 (K); 288 threads:
//   warpgroups 0 and 1 (warps 0-7) are consumers: each issues wgmma m64n128k32 on its 64 rows;
//   warp 8 is the producer: one thread waits for a free stage and issues two TMA loads into it.
// Shared tiles use the 128-byte swizzle (128 fp8 of K per row: one swizzle span), each stage 16 KB
// of A + 16 KB of B, 4 stages = 128 KB of dynamic shared memory. The byte layout is the bf16
// example's (examples/ptx/gemm_bf16_wgmma_tma.cu, verified on an H200) with k32 steps of 32 bytes.
// Precision: Hopper's fp8 tensor cores keep fewer accumulator bits than fp32, so each k-tile's four
// MMAs accumulate into a fresh register tile that is then added to an fp32 total (DeepGEMM's
// promotion every 128 of K); the two scales multiply the total once, in the epilogue.
// Edges: TMA zero-fills rows/columns outside A and B (any M, N, and K tails), the epilogue stores
// only elements inside C. TMA needs K % 16 == 0 (row pitch a multiple of 16 bytes): every shape of
// gemm_fp8 has it.
//
// solboard-launch:
// entry = "gemm_fp8_wgmma_tma"
// grid = ["cdiv(N, 128)", "cdiv(M, 128)", 1]
// block = [288, 1, 1]
// dynamic_smem = 132096
// params = [ {kind="tensormap", tensor="A", box=[128, 128], swizzle="128B", interleave="none", l2_promotion="256B", oob_fill="none"}, {kind="tensormap", tensor="B", box=[128, 128], swizzle="128B", interleave="none", l2_promotion="256B", oob_fill="none"}, {kind="ptr", tensor="scale_a"}, {kind="ptr", tensor="scale_b"}, {kind="ptr", tensor="C"}, {kind="u32", axis="M"}, {kind="u32", axis="N"}, {kind="u32", axis="K"} ]

#include <cuda.h>
#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int BM = 128, BN = 128, BK = 128, STAGES = 4;
constexpr int CONSUMERS = 256, THREADS = CONSUMERS + 32;
constexpr uint32_t A_BYTES = BM * BK, B_BYTES = BN * BK, STAGE_BYTES = A_BYTES + B_BYTES;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
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

__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int x, int y) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
        ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(x), "r"(y) : "memory");
}

// Shared-memory matrix descriptor: K-major tile, 128-byte swizzle, 8-row groups 1024 bytes apart.
__device__ __forceinline__ uint64_t make_desc(uint32_t addr) {
    uint64_t desc = (uint64_t)((addr & 0x3FFFF) >> 4);
    desc |= (uint64_t)1 << 16;              // leading byte offset (unused with this swizzle)
    desc |= (uint64_t)(1024 >> 4) << 32;    // stride byte offset: 8 rows x 128 bytes
    desc |= (uint64_t)1 << 62;              // layout: 128-byte swizzle
    return desc;
}

// Keep the compiler from moving accumulator reads/writes across the asynchronous MMAs.
__device__ __forceinline__ void fence_accumulators(float (&d)[64]) {
#pragma unroll
    for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

// scale_d = 0: D = A * B (the k-tile's first MMA starts a fresh partial sum); 1: D += A * B.
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
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

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_fp8_wgmma_tma(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                   const float* __restrict__ scale_a, const float* __restrict__ scale_b,
                   __nv_bfloat16* __restrict__ C, unsigned M, unsigned N, unsigned K) {
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    extern __shared__ uint8_t smem_raw[];
    // The 128-byte swizzle pattern repeats every 1024 bytes: tiles must start on such a boundary.
    const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int num_k = (K + BK - 1) / BK;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), CONSUMERS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (threadIdx.x >= CONSUMERS) {  // producer warp: one thread drives the copy engine
        if (threadIdx.x == CONSUMERS) {
            for (int kt = 0; kt < num_k; ++kt) {
                const int s = kt % STAGES;
                if (kt >= STAGES) mbar_wait(smem_addr(&empty[s]), ((kt / STAGES) - 1) & 1);
                const uint32_t a_dst = base + s * STAGE_BYTES, b_dst = a_dst + A_BYTES;
                mbar_expect_tx(smem_addr(&full[s]), STAGE_BYTES);
                tma_load_2d(a_dst, &map_a, smem_addr(&full[s]), kt * BK, m0);
                tma_load_2d(b_dst, &map_b, smem_addr(&full[s]), kt * BK, n0);
            }
        }
        return;
    }

    const int wg = threadIdx.x / 128;  // consumer warpgroup: rows wg*64 .. wg*64+63 of the tile
    float total[64], part[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) total[i] = part[i] = 0.0f;

    for (int kt = 0; kt < num_k; ++kt) {
        const int s = kt % STAGES;
        mbar_wait(smem_addr(&full[s]), (kt / STAGES) & 1);
        const uint32_t a_tile = base + s * STAGE_BYTES + wg * 64 * BK, b_tile = base + s * STAGE_BYTES + A_BYTES;
        fence_accumulators(part);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 32)  // +32 bytes along K inside the swizzled 128-byte rows
            wgmma_m64n128k32_e4m3(part, make_desc(a_tile + kk), make_desc(b_tile + kk), kk > 0);
        wgmma_commit();
        wgmma_wait_all();
        fence_accumulators(part);
        mbar_arrive(smem_addr(&empty[s]));  // this stage's MMAs are done: it can be refilled
#pragma unroll
        for (int i = 0; i < 64; ++i) total[i] += part[i];
    }

    // Accumulator layout of wgmma m64nN: thread (warp w, lane l) holds rows w*16 + l/4 (+8),
    // columns 8j + 2(l%4) (+1) in d[4j .. 4j+3].
    const float scale = scale_a[0] * scale_b[0];
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    const int row = m0 + wg * 64 + warp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int col = n0 + j * 8 + (lane % 4) * 2;
        store_pair(C, M, N, row, col, total[4 * j] * scale, total[4 * j + 1] * scale);
        store_pair(C, M, N, row + 8, col, total[4 * j + 2] * scale, total[4 * j + 3] * scale);
    }
}
