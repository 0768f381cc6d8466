export PYTHONUNBUFFERED=1 NEONLIKE_CUDA_SUITE_CHECK=0 PYTHONHASHSEED=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > $OUT/install.log 2>&1 || { ln -s ../kernels neonlike/kernels; export PYTHONPATH=/tmp/site:$PWD; python3 setup.py -q build_ext --inplace 2>/dev/null; }
timeout 60 python3 benchmarks/gpu_calls/prof_stmt.py > $OUT/prof.log 2>&1; head -60 $OUT/prof.log | cut -c1-160
timeout 420 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 15 --timeout 300 -rfEs -k gpu --ignore tests/test_gpu_offline.py --ignore tests/conformance tests > $OUT/t_suite.log 2>&1; echo "suite rc=$?"; grep -E "^(FAILED|ERROR)" $OUT/t_suite.log | cut -c1-220 | head -60; grep -E "^SKIPPED" $OUT/t_suite.log | cut -c1-200 | sort | uniq -c | sort -rn | head -20; tail -2 $OUT/t_suite.log
