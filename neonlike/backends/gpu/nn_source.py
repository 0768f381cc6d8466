"""The CUDA source of the GPU backend's convolution and pooling kernels (nn.py drives them), and
the same source built for the host, where it is checked without a GPU. Needs no pycuda.

Every kernel is one grid-stride loop over its output elements, each element computed by one
thread from global memory alone (no shared memory, no atomics, no warp functions): the result
cannot depend on how the loop is split, so the host build, where a single "thread" walks the
whole loop (HOST_PRELUDE: blockIdx 0, blockDim 1, gridDim 1), computes what the device does.
tests/test_gpu_offline.py compiles the host build with g++ and runs it on the emulated device.

    nl_im2col_<t>    col (C*T*R*S, L) <- the input's taps for output columns j0 .. j0 + L - 1
    nl_col2im_<t>    dI (C, D, H, W, N) += the columns' entries gathered back onto their inputs
    nl_pool_<t>      O (K, M, P, Q, N) <- max / avg / l2 over (J, T, R, S) windows (+ beta * O),
                     argmax (int32) <- the max's window position ((j*T + t)*R + r)*S + s
    nl_pool_bprop_<t> dI (C, D, H, W, N) <- alpha * the errors routed back (+ beta * dI)

<t> is f32 or f64 (float16 runs through float32 temps), each with 32-bit index arithmetic and,
as <t>_i64, 64-bit (nn.py takes it where an index could pass 2**31 - 1). A column j of the output enumerates
(m, p, q, n) with n innermost, as neon's (K, M*P*Q*N) view of the output does.
"""
from __future__ import annotations

CONV_GEOMETRY = ("C", "D", "H", "W", "N", "T", "R", "S", "M", "P", "Q",
                 "pd", "ph", "pw", "sd", "sh", "sw", "dd", "dh", "dw")
POOL_GEOMETRY = ("C", "D", "H", "W", "N", "K", "M", "P", "Q", "J", "T", "R", "S",
                 "pc", "pd", "ph", "pw", "sc", "sd", "sh", "sw")
POOL_OPS = {"max": 0, "avg": 1, "l2": 2}
TYPES = {"float32": ("f32", "float", "f"), "float64": ("f64", "double", "d")}

# kernel -> pycuda arg format, before the element type's suffix: P pointer, q int64, i int32,
# then f/d (the element type's scalar) where the format has an 'x'
_FORMATS = {
    "nl_im2col": "PPqq" + "i" * len(CONV_GEOMETRY),
    "nl_col2im": "PPqq" + "i" * len(CONV_GEOMETRY),
    "nl_pool": "PPP" + "i" * len(POOL_GEOMETRY) + "ix",
    "nl_pool_bprop": "PPP" + "i" * len(POOL_GEOMETRY) + "ixx",
}


def kernel(base: str, dtype: str, index64: bool = False) -> tuple:
    """(name, pycuda arg format) of kernel `base` for elements of `dtype` (float32/float64),
    with 64-bit index arithmetic where `index64` (32-bit integer division is several times
    cheaper on the device: the 64-bit variants are for tensors of 2**31 elements and more)."""
    suffix, _, scalar = TYPES[dtype]
    return f"{base}_{suffix}{'_i64' if index64 else ''}", _FORMATS[base].replace("x", scalar)


NN_SOURCE = r"""
// neonlike's convolution and pooling kernels: one grid-stride loop each, one output element a
// thread, nothing shared between threads (see neonlike/backends/gpu/nn_source.py)
#define NL_LOOP(e, total) \
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < (total); \
         e += (I)gridDim.x * blockDim.x)
#define NL_CONV_GEOMETRY int C, int D, int H, int W, int N, int T, int R, int S, int M, int P, \
    int Q, int pd, int ph, int pw, int sd, int sh, int sw, int dd, int dh, int dw
#define NL_CONV_ARGS C, D, H, W, N, T, R, S, M, P, Q, pd, ph, pw, sd, sh, sw, dd, dh, dw
#define NL_POOL_GEOMETRY int C, int D, int H, int W, int N, int K, int M, int P, int Q, int J, \
    int T, int R, int S, int pc, int pd, int ph, int pw, int sc, int sd, int sh, int sw
#define NL_POOL_ARGS C, D, H, W, N, K, M, P, Q, J, T, R, S, pc, pd, ph, pw, sc, sd, sh, sw

// the outputs o (0 <= o < n_out) whose window [o*stride - pad, o*stride - pad + win) holds x
__device__ __forceinline__ void nl_windows(int x, int pad, int win, int stride, int n_out,
                                           int* lo, int* hi) {
    const int a = x + pad - win + 1;
    *lo = a <= 0 ? 0 : (a + stride - 1) / stride;
    const int b = (x + pad) / stride;
    *hi = b < n_out - 1 ? b : n_out - 1;
}

// how many positions of output o's window lie inside [0, X)
__device__ __forceinline__ int nl_inside(int o, int pad, int win, int stride, int X) {
    const int start = o * stride - pad;
    const int end = start + win < X ? start + win : X;
    return end - (start > 0 ? start : 0);
}

// element e of a C-ordered (C, D, H, W, N) tensor as its coordinates (also an output's (K, M,
// P, Q, N))
template <typename I>
__device__ __forceinline__ void nl_coords(I e, int D, int H, int W, int N, int* c, int* d,
                                          int* h, int* w, int* n) {
    *n = (int)(e % N);
    I x = e / N;
    *w = (int)(x % W); x /= W;
    *h = (int)(x % H); x /= H;
    *d = (int)(x % D);
    *c = (int)(x / D);
}

// how many positions of pooling window (k, m, p, q) lie inside the input (NL_POOL_GEOMETRY's
// names in scope)
#define NL_WINDOW_SIZE(k, m, p, q) \
    ((I)nl_inside(k, pc, J, sc, C) * nl_inside(m, pd, T, sd, D) * nl_inside(p, ph, R, sh, H) \
     * nl_inside(q, pw, S, sw, W))

template <typename V, typename I>
__device__ __forceinline__ void nl_im2col(V* __restrict__ col, const V* __restrict__ in,
                                          I j0, I L, NL_CONV_GEOMETRY) {
    const I total = (I)C * T * R * S * L;
    NL_LOOP(e, total) {
        const I row = e / L, j = j0 + e % L;
        const int n = (int)(j % N);
        I pos = j / N;
        const int q = (int)(pos % Q); pos /= Q;
        const int p = (int)(pos % P);
        const int m = (int)(pos / P);
        I rr = row;
        const int s = (int)(rr % S); rr /= S;
        const int r = (int)(rr % R); rr /= R;
        const int t = (int)(rr % T);
        const int c = (int)(rr / T);
        const int d = m * sd - pd + t * dd, h = p * sh - ph + r * dh, w = q * sw - pw + s * dw;
        V v = 0;
        if (d >= 0 && d < D && h >= 0 && h < H && w >= 0 && w < W)
            v = in[((((I)c * D + d) * H + h) * W + w) * N + n];
        col[e] = v;
    }
}

// dI += the entries of columns j0 .. j0 + L - 1 that tap each input element (a gather: every
// thread owns one input element, so chunks of columns add up without atomics)
template <typename V, typename I>
__device__ __forceinline__ void nl_col2im(V* __restrict__ out, const V* __restrict__ col,
                                          I j0, I L, NL_CONV_GEOMETRY) {
    const I total = (I)C * D * H * W * N;
    NL_LOOP(e, total) {
        int c, d, h, w, n;
        nl_coords<I>(e, D, H, W, N, &c, &d, &h, &w, &n);
        V acc = 0;
        for (int t = 0; t < T; ++t) {
            const int md = d + pd - t * dd;
            if (md < 0 || md % sd) continue;
            const int m = md / sd;
            if (m >= M) continue;
            for (int r = 0; r < R; ++r) {
                const int ph_ = h + ph - r * dh;
                if (ph_ < 0 || ph_ % sh) continue;
                const int p = ph_ / sh;
                if (p >= P) continue;
                for (int s = 0; s < S; ++s) {
                    const int qw = w + pw - s * dw;
                    if (qw < 0 || qw % sw) continue;
                    const int q = qw / sw;
                    if (q >= Q) continue;
                    const I j = (((I)m * P + p) * Q + q) * N + n;
                    if (j < j0 || j >= j0 + L) continue;
                    acc += col[(((I)(c * T + t) * R + r) * S + s) * L + (j - j0)];
                }
            }
        }
        out[e] += acc;
    }
}

// O = pool(I) (+ beta * O): max takes the first maximum in (j, t, r, s) order, a NaN wins over
// numbers, padding never wins; avg divides by the window's positions inside the input; l2 is the
// root of the sum of squares
template <typename V, typename I>
__device__ __forceinline__ void nl_pool(V* __restrict__ out, int* __restrict__ argmax,
                                        const V* __restrict__ in, NL_POOL_GEOMETRY, int op,
                                        V beta) {
    const I total = (I)K * M * P * Q * N;
    NL_LOOP(e, total) {
        int k, m, p, q, n;
        nl_coords<I>(e, M, P, Q, N, &k, &m, &p, &q, &n);
        const int c0 = k * sc - pc, d0 = m * sd - pd, h0 = p * sh - ph, w0 = q * sw - pw;
        V best = op == 0 ? -(V)INFINITY : (V)0;
        int arg = 0;
        for (int j = 0; j < J; ++j) {
            const int c = c0 + j;
            if (c < 0 || c >= C) continue;
            for (int t = 0; t < T; ++t) {
                const int d = d0 + t;
                if (d < 0 || d >= D) continue;
                for (int r = 0; r < R; ++r) {
                    const int h = h0 + r;
                    if (h < 0 || h >= H) continue;
                    for (int s = 0; s < S; ++s) {
                        const int w = w0 + s;
                        if (w < 0 || w >= W) continue;
                        const V v = in[((((I)c * D + d) * H + h) * W + w) * N + n];
                        if (op == 0) {
                            if (v > best || (v != v && best == best)) {
                                best = v;
                                arg = ((j * T + t) * R + r) * S + s;
                            }
                        } else {
                            best += op == 1 ? v : v * v;
                        }
                    }
                }
            }
        }
        if (op == 1)
            best /= (V)NL_WINDOW_SIZE(k, m, p, q);
        else if (op == 2)
            best = sqrt(best);
        out[e] = beta != (V)0 ? best + beta * out[e] : best;
        if (argmax) argmax[e] = arg;
    }
}

// dI = alpha * (errors E routed back) (+ beta * dI): max pooling sends each error to the input
// its argmax names, avg spreads it evenly over the window's positions inside the input
template <typename V, typename I>
__device__ __forceinline__ void nl_pool_bprop(V* __restrict__ out, const V* __restrict__ err,
                                              const int* __restrict__ argmax,
                                              NL_POOL_GEOMETRY, int op, V alpha, V beta) {
    const I total = (I)C * D * H * W * N;
    NL_LOOP(e, total) {
        int c, d, h, w, n;
        nl_coords<I>(e, D, H, W, N, &c, &d, &h, &w, &n);
        int k0, k1, m0, m1, p0, p1, q0, q1;
        nl_windows(c, pc, J, sc, K, &k0, &k1);
        nl_windows(d, pd, T, sd, M, &m0, &m1);
        nl_windows(h, ph, R, sh, P, &p0, &p1);
        nl_windows(w, pw, S, sw, Q, &q0, &q1);
        V acc = 0;
        for (int k = k0; k <= k1; ++k) {
            const int j = c + pc - k * sc;
            for (int m = m0; m <= m1; ++m) {
                const int t = d + pd - m * sd;
                for (int p = p0; p <= p1; ++p) {
                    const int r = h + ph - p * sh;
                    for (int q = q0; q <= q1; ++q) {
                        const int s = w + pw - q * sw;
                        const I o = ((((I)k * M + m) * P + p) * Q + q) * N + n;
                        if (op == 0) {
                            if (argmax[o] == ((j * T + t) * R + r) * S + s) acc += err[o];
                        } else {
                            acc += err[o] / (V)NL_WINDOW_SIZE(k, m, p, q);
                        }
                    }
                }
            }
        }
        out[e] = beta != (V)0 ? alpha * acc + beta * out[e] : alpha * acc;
    }
}

#define NL_INSTANCES(V, suffix, I, isuffix) \
extern "C" __global__ void nl_im2col_##suffix##isuffix(V* col, const V* in, long long j0, \
                                                       long long L, NL_CONV_GEOMETRY) { \
    nl_im2col<V, I>(col, in, (I)j0, (I)L, NL_CONV_ARGS); } \
extern "C" __global__ void nl_col2im_##suffix##isuffix(V* out, const V* col, long long j0, \
                                                       long long L, NL_CONV_GEOMETRY) { \
    nl_col2im<V, I>(out, col, (I)j0, (I)L, NL_CONV_ARGS); } \
extern "C" __global__ void nl_pool_##suffix##isuffix(V* out, int* argmax, const V* in, \
                                                     NL_POOL_GEOMETRY, int op, V beta) { \
    nl_pool<V, I>(out, argmax, in, NL_POOL_ARGS, op, beta); } \
extern "C" __global__ void nl_pool_bprop_##suffix##isuffix(V* out, const V* err, \
                                                           const int* argmax, NL_POOL_GEOMETRY, \
                                                           int op, V alpha, V beta) { \
    nl_pool_bprop<V, I>(out, err, argmax, NL_POOL_ARGS, op, alpha, beta); }
NL_INSTANCES(float, f32, int, )
NL_INSTANCES(double, f64, int, )
NL_INSTANCES(float, f32, long long, _i64)
NL_INSTANCES(double, f64, long long, _i64)
"""

# The host build: CUDA's keywords as plain C++, one "thread" (index 0 of a 1-thread grid) that
# walks every grid-stride loop whole
HOST_PRELUDE = r"""
#include <cmath>
using std::sqrt;
#define __global__
#define __device__
#define __forceinline__ inline
struct nl_dim3 { long long x; };
static const nl_dim3 blockIdx = {0}, threadIdx = {0}, blockDim = {1}, gridDim = {1};
"""


def host_source() -> str:
    """NN_SOURCE as host C++ (g++ -shared -fPIC): the kernels as plain extern "C" functions."""
    return HOST_PRELUDE + NN_SOURCE
