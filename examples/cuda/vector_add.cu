// A CUDA C++ submission for vector_add (language "cuda"): nvcc compiles it for the runner's target
// at evaluation time (-gencode=arch=compute_90a,code=sm_90a on H100/H200), then it is launched
// exactly like a PTX submission, by the launch block below. Declare the kernel extern "C" so
// its name is not mangled (a mangled name is found too, when only one entry matches).
//
// Each thread adds two float4 (8 elements: two independent 16-byte loads per input in flight);
// the tail and unaligned pointers take a scalar path.
//
// solboard-launch:
// entry = "vector_add"
// grid = ["cdiv(N, 2048)", 1, 1]
// block = [256, 1, 1]
// params = [ {kind="ptr", tensor="a"}, {kind="ptr", tensor="b"}, {kind="ptr", tensor="c"}, {kind="u64", axis="N"} ]

#include <stdint.h>

extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, unsigned long long n) {
    const unsigned long long first = (blockIdx.x * 256ull + threadIdx.x) * 8ull;
    if (first >= n) return;
    const bool aligned = ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                           reinterpret_cast<uintptr_t>(c)) & 15) == 0;
    if (aligned && first + 8 <= n) {
        const float4* a4 = reinterpret_cast<const float4*>(a + first);
        const float4* b4 = reinterpret_cast<const float4*>(b + first);
        float4* c4 = reinterpret_cast<float4*>(c + first);
        const float4 x0 = __ldg(a4), x1 = __ldg(a4 + 1), y0 = __ldg(b4), y1 = __ldg(b4 + 1);
        c4[0] = make_float4(x0.x + y0.x, x0.y + y0.y, x0.z + y0.z, x0.w + y0.w);
        c4[1] = make_float4(x1.x + y1.x, x1.y + y1.y, x1.z + y1.z, x1.w + y1.w);
        return;
    }
    for (unsigned long long i = first; i < n && i < first + 8; ++i) c[i] = a[i] + b[i];
}
