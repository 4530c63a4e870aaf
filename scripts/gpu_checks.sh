#!/usr/bin/env bash
# The GPU lane: the backend matrix, the conformance suite and the benchmark with PyTorch and
# JAX data on the first CUDA device. Run from the repository root on a machine with a GPU:
#
#   bash scripts/gpu_checks.sh [OUTPUT_DIR]
#
# Each step is bounded in time and writes its log (and the benchmark its JSON and Markdown)
# to OUTPUT_DIR (default: reports/gpu); a step that fails does not stop the next.
set -uo pipefail
out="${1:-reports/gpu}"
mkdir -p "$out"
python="${PYTHON:-python3}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
status=0

step() {
  local name="$1" limit="$2"
  shift 2
  echo "== $name"
  local start=$SECONDS
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$out/$name.log"
  echo "== $name: exit $rc in $((SECONDS - start)) s"
  [ "$rc" -eq 0 ] || status=1
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$python" -c "import torch, jax; print('torch', torch.__version__, torch.cuda.is_available(),
'jax', jax.__version__, jax.devices())"

# pytest-benchmark, where installed, warns under pytest-xdist, and the suite's warnings fail.
step tests "${GPU_TESTS_LIMIT:-240}" "$python" -m pytest -p no:cacheprovider -p no:benchmark \
  -q -rfE --tb=short -n "${GPU_WORKERS:-8}" --device cuda -k "torch or jax" \
  tests/test_semantics.py tests/test_dtypes.py tests/test_range.py tests/test_accelerators.py \
  tests/test_dtype_edges.py tests/test_numerics.py tests/test_errors.py tests/test_narrow.py \
  tests/test_transforms.py
# The machine's own torch may be older than CI's: compiling a PyTorch call first, and after
# other libraries' calls (in fresh processes).
step compile "${GPU_COMPILE_LIMIT:-90}" "$python" -m pytest -p no:cacheprovider -p no:benchmark \
  -q -rfE --tb=short tests/test_compile.py -k "first_call or after_other"
step conformance "${GPU_CONFORMANCE_LIMIT:-150}" "$python" -m anyreduce conformance \
  --backend torch:cuda --backend jax:cuda --examples 10 --no-progress --json "$out/conformance.json"
step bench "${GPU_BENCH_LIMIT:-150}" "$python" -m anyreduce bench --device cuda \
  --backends torch jax --repeats 5 --json "$out/bench.json" --markdown "$out/bench.md"
step bench-large "${GPU_BENCH_LIMIT:-150}" "$python" -m anyreduce bench --device cuda \
  --backends torch jax --dtypes float32 --shape 16384 32768 --repeats 5 --no-small \
  --no-narrow --no-masked --json "$out/bench-large.json" --markdown "$out/bench-large.md"
exit "$status"
