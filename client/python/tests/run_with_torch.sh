#!/bin/sh
# Runs a pytest file of this directory under the Python that has PyTorch
# (deploy/setup.sh makes /opt/autotuned/venv; $AUTOTUNED_TORCH_PYTHON overrides),
# with the package and its generated stubs from the runfiles on the path.
#   run_with_torch.sh TEST_FILE.py    (relative to client/python/tests)
set -eu
py=${AUTOTUNED_TORCH_PYTHON:-/opt/autotuned/venv/bin/python}
if [ ! -x "$py" ] || ! "$py" -c "import torch" >/dev/null 2>&1; then
  echo "FAIL: no PyTorch at $py: run deploy/setup.sh (it installs torch 2.11 into /opt/autotuned/venv)" >&2
  exit 1
fi
here=$TEST_SRCDIR/autotuned/client/python
# A runfiles-relative library path (BUILD's $(rootpath)) stays valid after the cd.
case ${AUTOTUNED_KERNELS_LIB:-} in
  "" | /*) ;;
  *) export AUTOTUNED_KERNELS_LIB="$TEST_SRCDIR/autotuned/$AUTOTUNED_KERNELS_LIB" ;;
esac
case ${AUTOTUNED_TORCH_OPS_LIB:-} in
  "" | /* | none) ;;
  *) export AUTOTUNED_TORCH_OPS_LIB="$TEST_SRCDIR/autotuned/$AUTOTUNED_TORCH_OPS_LIB" ;;
esac
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
export AUTOTUNED_DAEMON="$TEST_SRCDIR/autotuned/daemon/autotuned"
export AUTOTUNED_CTL="$TEST_SRCDIR/autotuned/client/cli/autotunectl"  # where a test has it
export TORCHINDUCTOR_CACHE_DIR="${TEST_TMPDIR:-/tmp}/inductor"
export TRITON_CACHE_DIR="${TEST_TMPDIR:-/tmp}/triton"
# The vector ISAs that the CPU reports are taken as they are: without it,
# every process's first Inductor compile builds a probe per ISA and loads it
# in a new Python that imports torch (seconds of CPU each, in every rank of
# every launch). The ISA extensions' own probes (AVX512-BF16, VNNI, AMX)
# still run, once per test where it uses tests/relowering.py.
export TORCHINDUCTOR_VEC_ISA_OK=1
export HOME="${TEST_TMPDIR:-/tmp}"
# Bazel's test sharding: tests/conftest.py keeps this shard's tests.
if [ -n "${TEST_SHARD_STATUS_FILE:-}" ]; then touch "$TEST_SHARD_STATUS_FILE"; fi
cd "$here/tests"
exec "$py" -m pytest -v -p no:cacheprovider --durations=0 "$1"
