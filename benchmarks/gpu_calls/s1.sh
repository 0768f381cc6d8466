# session 11, first GPU call: install, smoke, the GPU tests, the suite's GPU parameters, the bench
export PYTHONUNBUFFERED=1 NEONLIKE_CUDA_SUITE_CHECK=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > $OUT/install.log 2>&1 || { tail -20 $OUT/install.log; ln -s ../kernels neonlike/kernels; export PYTHONPATH=/tmp/site:$PWD; python3 setup.py -q build_ext --inplace; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
nvcc --version | tail -1; python3 -c "import numpy, numba; print(numpy.__version__, numba.__version__)"
timeout 60 python3 - <<'PY' 2>&1 | tee $OUT/smoke.log
import time, numpy as np
t=time.time()
import pycuda.autoinit
from neonlike.backends.gpu import cublas
cublas.Cublas(); print("cublas ok", time.time()-t)
from neonlike.backends import gen_backend
be = gen_backend("gpu", rng_seed=0)
a = be.array(np.arange(12.0).reshape(3, 4)); o = be.empty((3, 4))
o[:] = a * 2.0 + 1.0; print(o.get())
PY
timeout 170 python3 -m pytest -q -p no:cacheprovider --timeout 100 -rfE tests/test_gpu.py tests/test_gpu_offline.py > $OUT/t_gpu.log 2>&1; echo "t_gpu rc=$?"; tail -40 $OUT/t_gpu.log | cut -c1-300
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 14 --timeout 200 -rfE -k gpu --ignore tests/test_gpu.py --ignore tests/test_gpu_offline.py --ignore tests/conformance tests > $OUT/t_suite.log 2>&1; echo "suite rc=$?"; grep -E "^(FAILED|ERROR)" $OUT/t_suite.log | cut -c1-200 | head -40; tail -3 $OUT/t_suite.log
timeout 110 python3 benchmarks/bench_gpu.py --repeats 10 > $OUT/bench.log 2>&1; echo "bench rc=$?"; tail -40 $OUT/bench.log
