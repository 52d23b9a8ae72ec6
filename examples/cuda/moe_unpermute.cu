// moe_unpermute in plain CUDA C++: the weighted combine of each token's K expert rows.
// out[t] = sum over j of topk_weights[t, j] * expert_out[dest_rows[t, j]], in fp32, rounded once.
//
// One block of 256 threads per token: every thread walks the hidden dim 8 bf16 (16 bytes) at a
// time, gathering the K rows (their numbers and weights are the same for the whole block, so they
// stay in L1) (each row is read once, from wherever its expert's block put it); a row length or an
// address that does not allow 16-byte accesses takes the element-by-element path.
//
// solboard-launch:
// entry = "moe_unpermute"
// grid = ["T", 1, 1]
// block = [256, 1, 1]
// params = [ {kind="ptr", tensor="expert_out"}, {kind="ptr", tensor="dest_rows"}, {kind="ptr", tensor="topk_weights"}, {kind="ptr", tensor="out"}, {kind="u32", axis="H"}, {kind="u32", axis="K"} ]

#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int THREADS = 256, VEC = 8;

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS)
moe_unpermute(const __nv_bfloat16* __restrict__ expert_out, const int* __restrict__ dest_rows,
              const float* __restrict__ topk_weights, __nv_bfloat16* __restrict__ out, unsigned H, unsigned K) {
    const size_t token = blockIdx.x;
    const int* rows = dest_rows + token * K;
    const float* weights = topk_weights + token * K;
    __nv_bfloat16* target = out + token * H;
    const bool vector = H % VEC == 0 && ((reinterpret_cast<uintptr_t>(expert_out) | reinterpret_cast<uintptr_t>(out)) % 16) == 0;
    if (!vector) {
        for (unsigned c = threadIdx.x; c < H; c += THREADS) {
            float total = 0.0f;
            for (unsigned j = 0; j < K; ++j) total += weights[j] * __bfloat162float(expert_out[(size_t)rows[j] * H + c]);
            target[c] = __float2bfloat16(total);
        }
        return;
    }
    for (unsigned c = threadIdx.x * VEC; c < H; c += THREADS * VEC) {
        float total[VEC] = {};
        for (unsigned j = 0; j < K; ++j) {
            const uint4 raw = *reinterpret_cast<const uint4*>(expert_out + (size_t)rows[j] * H + c);
            const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
            for (int i = 0; i < VEC / 2; ++i) {
                total[2 * i] += weights[j] * __low2float(pairs[i]);
                total[2 * i + 1] += weights[j] * __high2float(pairs[i]);
            }
        }
        uint4 packed;
        __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&packed);
#pragma unroll
        for (int i = 0; i < VEC / 2; ++i) pairs[i] = __floats2bfloat162_rn(total[2 * i], total[2 * i + 1]);
        *reinterpret_cast<uint4*>(target + c) = packed;
    }
}
