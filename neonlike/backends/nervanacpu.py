"""neon's module path of the 'cpu' backend; the device itself lives in backends/cpu/."""
from .cpu.device import CPUTensor, NervanaCPU

__all__ = ["NervanaCPU", "CPUTensor"]
