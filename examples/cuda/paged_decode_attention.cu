// paged_decode_attention in plain CUDA C++: one decode step of grouped-query attention over vLLM's
// paged KV cache (pages of 16 tokens). out[b, h] = softmax(q[b, h] . K_b^T * softmax_scale) V_b
// over the seq_lens[b] cached tokens of KV head h / (Hq / Hkv).
//
// One block of 256 threads (8 warps) per (query head, sequence). Each lane holds 4 of the 128
// dims of q (fp32, pre-scaled to log2 units). The warps walk the sequence 32 tokens at a time,
// 4 consecutive tokens each: the page comes from block_table, four keys are loaded before any is
// used (memory-level parallelism), their dot products reduced across the warp, and an online
// softmax keeps a running max, sum and 4 output dims per lane. The 8 warps' partial results are
// merged in shared memory at the end. Only the sequence's own tokens are read: slots past
// seq_lens[b] (other data) never are.
//
// solboard-launch:
// entry = "paged_decode_attention"
// grid = ["Hq", "B", 1]
// block = [256, 1, 1]
// params = [ {kind="ptr", tensor="q"}, {kind="ptr", tensor="k_cache"}, {kind="ptr", tensor="v_cache"}, {kind="ptr", tensor="block_table"}, {kind="ptr", tensor="seq_lens"}, {kind="ptr", tensor="out"}, {kind="u32", axis="Hq"}, {kind="u32", axis="Hkv"}, {kind="u32", value="S / 16"}, {kind="f32", constant="softmax_scale"} ]

#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int HEAD_DIM = 128, PAGE = 16, WARPS = 8, THREADS = WARPS * 32, UNROLL = 4;
constexpr float LOG2E = 1.4426950408889634f;

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
    return x;
}

__device__ __forceinline__ void load4(float (&dst)[4], const __nv_bfloat16* src) {
    const uint2 raw = *reinterpret_cast<const uint2*>(src);
    const __nv_bfloat162 lo = *reinterpret_cast<const __nv_bfloat162*>(&raw.x);
    const __nv_bfloat162 hi = *reinterpret_cast<const __nv_bfloat162*>(&raw.y);
    dst[0] = __low2float(lo);
    dst[1] = __high2float(lo);
    dst[2] = __low2float(hi);
    dst[3] = __high2float(hi);
}

struct Partial {  // one warp's share: running max (log2 units), sum, and 4 output dims per lane
    float max = -INFINITY, sum = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
};

// Merge the warps' partial softmaxes: thread d < 128 writes output dim d.
__device__ void merge_and_store(const Partial& mine, __nv_bfloat16* out) {
    __shared__ float maxes[WARPS], sums[WARPS], accs[WARPS][HEAD_DIM];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) {
        maxes[warp] = mine.max;
        sums[warp] = mine.sum;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) accs[warp][lane * 4 + e] = mine.acc[e];
    __syncthreads();
    if (threadIdx.x >= HEAD_DIM) return;
    float top = -INFINITY;
    for (int w = 0; w < WARPS; ++w) top = fmaxf(top, maxes[w]);
    float sum = 0.0f, value = 0.0f;
    for (int w = 0; w < WARPS; ++w) {
        const float weight = exp2f(maxes[w] - top);  // a warp that saw no token has max -inf: weight 0
        sum += sums[w] * weight;
        value += accs[w][threadIdx.x] * weight;
    }
    out[threadIdx.x] = __float2bfloat16(value / sum);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS)
paged_decode_attention(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
                       const __nv_bfloat16* __restrict__ v_cache, const int* __restrict__ block_table,
                       const int* __restrict__ seq_lens, __nv_bfloat16* __restrict__ out, unsigned Hq, unsigned Hkv,
                       unsigned pages_per_seq, float softmax_scale) {
    const int h = blockIdx.x, b = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int kv_head = h / (Hq / Hkv), length = seq_lens[b];
    const int* pages = block_table + (size_t)b * pages_per_seq;
    float query[4];
    load4(query, q + ((size_t)b * Hq + h) * HEAD_DIM + lane * 4);
#pragma unroll
    for (int e = 0; e < 4; ++e) query[e] *= softmax_scale * LOG2E;

    Partial mine;
    for (int first = warp * UNROLL; first < length; first += WARPS * UNROLL) {
        float keys[UNROLL][4], values[UNROLL][4], scores[UNROLL];
        size_t rows[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int token = min(first + u, length - 1);  // past the end: re-read a real token, then mask it
            const size_t slot = (size_t)pages[token / PAGE] * PAGE + token % PAGE;
            rows[u] = (slot * Hkv + kv_head) * HEAD_DIM + lane * 4;
            load4(keys[u], k_cache + rows[u]);
        }
        float tile_max = -INFINITY;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            float dot = 0.0f;
#pragma unroll
            for (int e = 0; e < 4; ++e) dot += query[e] * keys[u][e];
            scores[u] = first + u < length ? warp_sum(dot) : -INFINITY;
            tile_max = fmaxf(tile_max, scores[u]);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) load4(values[u], v_cache + rows[u]);
        const float new_max = fmaxf(mine.max, tile_max);  // token `first` is real: finite
        const float alpha = exp2f(mine.max - new_max);
        mine.max = new_max;
        mine.sum *= alpha;
#pragma unroll
        for (int e = 0; e < 4; ++e) mine.acc[e] *= alpha;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const float p = exp2f(scores[u] - new_max);
            mine.sum += p;
#pragma unroll
            for (int e = 0; e < 4; ++e) mine.acc[e] += p * values[u][e];
        }
    }
    merge_and_store(mine, out + ((size_t)b * Hq + h) * HEAD_DIM);
}
