// kernels/cuda_helpers.cuh: the device helpers every kernel of neonlike.backends.gpu.render
// carries (inline: each kernel's source stands alone, for nvcc and for the binary cache)
#include <cuda_fp16.h>
#ifndef NEONLIKE_CUDA_PRELUDE
#define NEONLIKE_CUDA_PRELUDE
// numpy's maximum/minimum: nan in either operand gives nan
__device__ __forceinline__ float nl_max(float a, float b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ double nl_max(double a, double b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ float nl_min(float a, float b) { return (a < b || a != a) ? a : b; }
__device__ __forceinline__ double nl_min(double a, double b) { return (a < b || a != a) ? a : b; }
// numpy's float32 exp2 is +0 from x = -149.5 down (2**-149.5 would round to the smallest subnormal)
__device__ __forceinline__ float nl_exp2(float x) { return x <= -149.5f ? 0.0f : exp2f(x); }
__device__ __forceinline__ double nl_exp2(double x) { return exp2(x); }
// an integer store (neonlike.dtypes.cast_for_store): nan -> 0, saturate, round half to even
__device__ __forceinline__ float nl_sat(float v, float lo, float hi) {
    return v != v ? 0.0f : (v >= hi ? hi : (v <= lo ? lo : rintf(v)));
}
__device__ __forceinline__ double nl_sat(double v, double lo, double hi) {
    return v != v ? 0.0 : (v >= hi ? hi : (v <= lo ? lo : rint(v)));
}
// argmax/argmin: whether (v, k) replaces the best (b, at) so far: the first nan wins, then the
// larger (smaller) value, then the lower flat index (numpy's first occurrence)
template <typename T, typename I>
__device__ __forceinline__ bool nl_argmax_takes(T v, I k, T b, I at) {
    return b != b ? (v != v && k < at) : (v != v || v > b || (v == b && k < at));
}
template <typename T, typename I>
__device__ __forceinline__ bool nl_argmin_takes(T v, I k, T b, I at) {
    return b != b ? (v != v && k < at) : (v != v || v < b || (v == b && k < at));
}
#endif
