"""The GPU device: pycuda memory and launches (device.py), trees rendered as CUDA C (render.py),
compiled by nvcc with a disk cache (compile.py), GEMM through cuBLAS (cublas.py), layouts and
launch arguments (layout.py) and counter-based random numbers (rng.py); `layout` and `rng` need
no pycuda. `neonlike.backends.nervanagpu` is neon's name for it."""
