"""neon's module path of the 'gpu' backend; the device itself lives in backends/gpu/."""
from .gpu.device import GPUTensor, NervanaGPU

__all__ = ["NervanaGPU", "GPUTensor"]
