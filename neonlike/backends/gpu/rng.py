"""The GPU backend's random numbers: a counter-based generator (splitmix64 of a key and the
element index; the key hashed from a seed and a per-call counter), its CUDA source, and the same
formula in numpy (`rng_uniform_reference`, `rng_normal_reference`). Needs no pycuda."""
from __future__ import annotations

import numpy as np


# **************** random numbers: splitmix64 of (key, element index) ****************

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
STREAM = 0xD1B54A32D192ED03   # spreads element indices apart before the mix


def splitmix64(z: int) -> int:
    z = (z + GOLDEN) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def rng_key(seed: int, counter: int) -> int:
    """The key of draw number `counter` from a generator seeded with `seed`."""
    return splitmix64((seed & M64) ^ splitmix64(counter & M64))


RNG_SOURCE = """\
// neonlike's counter-based generator: bits(i, j) = splitmix64(key + (2 i + j) * STREAM)
__device__ __forceinline__ unsigned long long nl_mix(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ float nl_unit(unsigned long long key, long long i, int j) {
    // 24 high bits: a float in [0, 1) with every value exact
    const unsigned long long z = nl_mix(key + (unsigned long long)(2 * i + j) * 0xD1B54A32D192ED03ull);
    return (float)(z >> 40) * 5.9604644775390625e-08f;
}
extern "C" __global__ void nl_rand_uniform(float* out, const long long n,
                                           const unsigned long long key)
{
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = nl_unit(key, i, 0);
}
extern "C" __global__ void nl_rand_normal(float* out, const long long n,
                                          const unsigned long long key, const float mean,
                                          const float stdv)
{
    // Box-Muller on the element's two draws; u1 in (0, 1] keeps the log finite
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float u1 = 1.0f - nl_unit(key, i, 0);
        const float u2 = nl_unit(key, i, 1);
        out[i] = mean + stdv * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    }
}
"""
RNG_BLOCK = 256


def _rng_bits(key: int, n: int, j: int) -> np.ndarray:
    i = np.arange(n, dtype=np.uint64)
    z = np.uint64(key) + (np.uint64(2) * i + np.uint64(j)) * np.uint64(STREAM)
    z = z + np.uint64(GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def rng_uniform_reference(key: int, n: int) -> np.ndarray:
    """What nl_rand_uniform writes for `key`, in numpy (float32 in [0, 1))."""
    with np.errstate(over="ignore"):
        return ((_rng_bits(key, n, 0) >> np.uint64(40)).astype(np.float32)
                * np.float32(2.0**-24))


def rng_normal_reference(key: int, n: int, mean: float = 0.0, stdv: float = 1.0) -> np.ndarray:
    """nl_rand_normal's formula in numpy (float64 math: equal to the kernel's to float32's
    precision, not bit for bit)."""
    with np.errstate(over="ignore"):
        u1 = 1.0 - (_rng_bits(key, n, 0) >> np.uint64(40)).astype(np.float64) * 2.0**-24
        u2 = (_rng_bits(key, n, 1) >> np.uint64(40)).astype(np.float64) * 2.0**-24
    return (mean + stdv * np.sqrt(-2.0 * np.log(u1)) * np.cos(2 * np.pi * u2)).astype(np.float32)
