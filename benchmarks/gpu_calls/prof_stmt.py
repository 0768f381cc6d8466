"""Host cost of one small statement on the gpu backend: timing, then cProfile's top entries."""
import cProfile, pstats, time, sys
import numpy as np
from neonlike.backends import gen_backend
be = gen_backend("gpu", rng_seed=0)
s = be.array(np.random.default_rng(0).uniform(-1, 1, (10, 10)).astype(np.float32))
o = be.empty((10, 10))
def stmt():
    o[:] = be.tanh(s * 2.0 + 1.0) * s - s
for _ in range(200):
    stmt()
be.synchronize()
for rep in range(3):
    t = time.perf_counter()
    for _ in range(2000):
        stmt()
    be.synchronize()
    print(f"statement: {(time.perf_counter() - t) / 2000 * 1e6:.1f} us")
import pycuda.driver as drv
t = time.perf_counter()
for _ in range(2000):
    be.synchronize()
print(f"synchronize alone: {(time.perf_counter() - t) / 2000 * 1e6:.1f} us")
pr = cProfile.Profile()
pr.enable()
for _ in range(2000):
    stmt()
pr.disable()
pstats.Stats(pr, stream=sys.stdout).sort_stats("tottime").print_stats(25)
