// rmsnorm in plain CUDA C++: the fused residual add and RMSNorm of a transformer block.
// h = x + residual (fp32); residual_out = h rounded to bf16; y = h / sqrt(mean(h^2) + eps) * weight,
// rounded to bf16 once. eps comes from the problem as an fp32 parameter (constant "eps").
//
// One block of 256 threads per token row. A first pass writes residual_out and sums h^2 in fp32
// (the unrounded h, as the reference normalises it); a block reduction gives the row's scale; a
// second pass recomputes h from x and residual (cache hits) and writes y. Rows whose length and
// addresses allow it move 8 bf16 (16 bytes) at a time; any other row goes element by element.
//
// solboard-launch:
// entry = "rmsnorm"
// grid = ["T", 1, 1]
// block = [256, 1, 1]
// params = [ {kind="ptr", tensor="x"}, {kind="ptr", tensor="residual"}, {kind="ptr", tensor="weight"}, {kind="ptr", tensor="y"}, {kind="ptr", tensor="residual_out"}, {kind="u32", axis="H"}, {kind="f32", constant="eps"} ]

#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int THREADS = 256, VEC = 8;

__device__ __forceinline__ float block_sum(float x) {
    __shared__ float partial[THREADS / 32];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = x;
    __syncthreads();
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < THREADS / 32; ++w) total += partial[w];
    return total;
}

__device__ __forceinline__ void unpack(float (&dst)[VEC], const uint4& raw) {
    const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < VEC / 2; ++i) {
        dst[2 * i] = __low2float(pairs[i]);
        dst[2 * i + 1] = __high2float(pairs[i]);
    }
}

__device__ __forceinline__ uint4 pack(const float (&src)[VEC]) {
    uint4 raw;
    __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < VEC / 2; ++i) pairs[i] = __floats2bfloat162_rn(src[2 * i], src[2 * i + 1]);
    return raw;
}

__device__ __forceinline__ void sum_chunk(float (&h)[VEC], const __nv_bfloat16* x, const __nv_bfloat16* residual) {
    float r[VEC];
    unpack(h, *reinterpret_cast<const uint4*>(x));
    unpack(r, *reinterpret_cast<const uint4*>(residual));
#pragma unroll
    for (int i = 0; i < VEC; ++i) h[i] += r[i];
}

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS)
rmsnorm(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ residual,
        const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ y,
        __nv_bfloat16* __restrict__ residual_out, unsigned H, float eps) {
    const size_t offset = (size_t)blockIdx.x * H;
    x += offset, residual += offset, y += offset, residual_out += offset;
    const bool vector = H % VEC == 0 && ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(residual) |
                                          reinterpret_cast<uintptr_t>(weight) | reinterpret_cast<uintptr_t>(y) |
                                          reinterpret_cast<uintptr_t>(residual_out)) % 16) == 0;
    float squares = 0.0f;
    if (vector) {
        for (unsigned c = threadIdx.x * VEC; c < H; c += THREADS * VEC) {
            float h[VEC];
            sum_chunk(h, x + c, residual + c);
            *reinterpret_cast<uint4*>(residual_out + c) = pack(h);
#pragma unroll
            for (int i = 0; i < VEC; ++i) squares += h[i] * h[i];
        }
    } else {
        for (unsigned c = threadIdx.x; c < H; c += THREADS) {
            const float h = __bfloat162float(x[c]) + __bfloat162float(residual[c]);
            residual_out[c] = __float2bfloat16(h);
            squares += h * h;
        }
    }
    const float scale = rsqrtf(block_sum(squares) / H + eps);
    if (vector) {
        for (unsigned c = threadIdx.x * VEC; c < H; c += THREADS * VEC) {
            float h[VEC], w[VEC];
            sum_chunk(h, x + c, residual + c);
            unpack(w, *reinterpret_cast<const uint4*>(weight + c));
#pragma unroll
            for (int i = 0; i < VEC; ++i) h[i] = h[i] * scale * w[i];
            *reinterpret_cast<uint4*>(y + c) = pack(h);
        }
    } else {
        for (unsigned c = threadIdx.x; c < H; c += THREADS) {
            const float h = __bfloat162float(x[c]) + __bfloat162float(residual[c]);
            y[c] = __float2bfloat16(h * scale * __bfloat162float(weight[c]));
        }
    }
}
