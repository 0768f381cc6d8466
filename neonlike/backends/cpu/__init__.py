"""The CPU device: numpy memory, trees rendered as Numba source (render.py, vecmath.py), compiled
and launched as programs (program.py), GEMM through MKL or numpy (gemm.py), convolution, pooling
and batch norm (nn.py, conv_kernels.py, layer.py). Numba is imported only where a kernel is
compiled; `neonlike.backends.nervanacpu` and `nervanamkl` are neon's names for it."""
