# session 20: the GPU check in two calls, each under the 600 s limit:
#   bash benchmarks/gpu_calls/s4.sh tests   # the GPU tests (device parameters included), the suite's gpu parameters
#   bash benchmarks/gpu_calls/s4.sh bench   # bench_gpu.py, then bench_gpu_nn.py (conv, pool, epochs against torch)
export PYTHONUNBUFFERED=1 NEONLIKE_CUDA_SUITE_CHECK=0 PYTHONHASHSEED=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > $OUT/install.log 2>&1 || { ln -s ../kernels neonlike/kernels; export PYTHONPATH=/tmp/site:$PWD; python3 setup.py -q build_ext --inplace 2>/dev/null; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ "$1" = tests ]; then
  timeout 240 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 8 --timeout 200 -rfE tests/test_gpu.py tests/test_gpu_offline.py tests/test_gpu_nn_offline.py tests/test_gpu_frontends_offline.py > $OUT/t_gpu.log 2>&1; echo "t_gpu rc=$?"; grep -E "^(FAILED|ERROR)" $OUT/t_gpu.log | cut -c1-250 | head -30; tail -1 $OUT/t_gpu.log
  timeout 300 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 15 --timeout 240 -rfEs -k gpu --ignore tests/test_gpu.py --ignore tests/test_gpu_offline.py --ignore tests/test_gpu_nn_offline.py --ignore tests/test_gpu_frontends_offline.py --ignore tests/conformance tests > $OUT/t_suite.log 2>&1; echo "suite rc=$?"; grep -E "^(FAILED|ERROR)" $OUT/t_suite.log | cut -c1-220 | head -40; grep -E "^SKIPPED" $OUT/t_suite.log | cut -c1-160 | sort | uniq -c | sort -rn | head -8; tail -1 $OUT/t_suite.log
else
  timeout 200 python3 benchmarks/bench_gpu.py --repeats 10 > $OUT/bench.log 2>&1; echo "bench rc=$?"; cut -c1-200 $OUT/bench.log | tail -45
  timeout 300 python3 benchmarks/bench_gpu_nn.py --repeats 10 > $OUT/bench_nn.log 2>&1; echo "bench_nn rc=$?"; cut -c1-200 $OUT/bench_nn.log | tail -30
fi
