#!/bin/sh
# Installs everything autotuned needs to build, test and run on Debian 12,
# from Debian's own archive (Bazel 4.2.3 included: the build downloads
# nothing). Safe to run any number of times. Needs root (or sudo).
# systemd: systemd-analyze, which //deploy:install_test runs on the unit;
# passwd: useradd and groupadd for deploy/install.sh and the socket-group test.
# (fuzz/run.sh installs clang for itself; the test suite does not need it.)
# python3-venv, python3-pip, python3-pytest: the Python client's tests;
# python3-dev: Python.h, which torch.compile's C++ code on CPU includes; PyTorch
# 2.11 from PyPI goes into the venv /opt/autotuned/venv (about 2.5 min and
# 4.6 GB with its CUDA wheels; it sees Debian's grpcio and protobuf), used by
# the tests of the torch.distributed and Inductor integration, with ruff and
# mypy (pinned) for the Python client's lint test.
set -eu

PACKAGES="bazel-bootstrap bazel-rules-java \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
  libspdlog-dev libabsl-dev catch2 zlib1g-dev \
  python3-grpcio python3-protobuf python3-venv python3-pip python3-pytest python3-dev \
  g++ git ca-certificates \
  systemd passwd"

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing="$missing $p"
done

if [ -n "$missing" ]; then
  echo "setup: installing:$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
else
  echo "setup: all packages present"
fi

VENV=/opt/autotuned/venv
TORCH_VERSION=2.11.0
# Debian's interpreter, whatever else is first on PATH (pyenv, conda): the
# venv must see the python3-grpcio and python3-protobuf installed above.
if ! "$VENV/bin/python" -c "import torch, numpy, pytest, grpc, google.protobuf; assert torch.__version__.startswith('$TORCH_VERSION')" >/dev/null 2>&1; then
  echo "setup: installing torch $TORCH_VERSION into $VENV"
  $SUDO rm -rf "$VENV"
  $SUDO /usr/bin/python3 -m venv --system-site-packages "$VENV"
  $SUDO "$VENV/bin/pip" install -q --progress-bar off "torch==$TORCH_VERSION" numpy pytest
else
  echo "setup: torch $TORCH_VERSION present in $VENV"
fi

# The Python client's linters, pinned (a new release may find new things):
# //client/python:python_lint_test runs them from the venv.
RUFF_VERSION=0.17.6
MYPY_VERSION=2.4.1
if ! "$VENV/bin/ruff" --version 2>/dev/null | grep -qx "ruff $RUFF_VERSION" ||
   ! "$VENV/bin/mypy" --version 2>/dev/null | grep -q "^mypy $MYPY_VERSION "; then
  echo "setup: installing ruff $RUFF_VERSION and mypy $MYPY_VERSION into $VENV"
  $SUDO "$VENV/bin/pip" install -q --progress-bar off "ruff==$RUFF_VERSION" "mypy==$MYPY_VERSION"
else
  echo "setup: ruff $RUFF_VERSION and mypy $MYPY_VERSION present in $VENV"
fi

# The CUDA toolkit and NCCL, from NVIDIA's wheels on PyPI, every version
# pinned (unpinned, pip mixes one release's nvcc with another's ptxas), shaped
# into a CUDA root in $CUDA_ROOT: bin/nvcc, include/ (CUDA, CCCL, NCCL),
# lib/ with the link names libcudart.so and libnccl.so that the wheels lack.
# The build finds it there (bazel/cuda_configure.bzl). NCCL is the version
# torch $TORCH_VERSION pins. AUTOTUNED_CUDA_ROOT=none skips it: the build
# then has no cuda backend (docs/operations.md#building-without-cuda).
CUDA_ROOT=/opt/autotuned/cuda
CUDA_NVCC_VERSION=13.0.88
CUDA_WHEELS="nvidia-cuda-nvcc==$CUDA_NVCC_VERSION nvidia-cuda-crt==$CUDA_NVCC_VERSION \
  nvidia-nvvm==$CUDA_NVCC_VERSION nvidia-cuda-runtime==13.0.96 \
  nvidia-cuda-cccl==13.0.85 nvidia-nccl-cu13==2.28.9"
cuda_root_ok() {
  [ "$(cat "$1/.wheels" 2>/dev/null)" = "$(echo $CUDA_WHEELS)" ] &&
    "$1/bin/nvcc" --version 2>/dev/null | grep -q "V$CUDA_NVCC_VERSION\$" &&
    "$1/bin/ptxas" --version 2>/dev/null | grep -q "V$CUDA_NVCC_VERSION\$" &&
    [ -e "$1/lib/libcudart.so" ] && [ -e "$1/lib/libnccl.so" ] && [ -e "$1/include/nccl.h" ]
}
if [ "${AUTOTUNED_CUDA_ROOT:-}" = none ]; then
  echo "setup: AUTOTUNED_CUDA_ROOT=none: no CUDA toolkit; the build has no cuda backend"
elif cuda_root_ok "$CUDA_ROOT"; then
  echo "setup: CUDA toolkit (nvcc $CUDA_NVCC_VERSION) and NCCL present in $CUDA_ROOT"
else
  echo "setup: installing the CUDA toolkit (nvcc $CUDA_NVCC_VERSION) and NCCL into $CUDA_ROOT"
  new="$CUDA_ROOT.new"
  $SUDO rm -rf "$new"
  $SUDO "$VENV/bin/pip" install -q --progress-bar off --no-deps --only-binary=:all: \
    --target "$new/wheels" $CUDA_WHEELS
  $SUDO mkdir -p "$new/root"
  $SUDO cp -a "$new/wheels/nvidia/cu13/." "$new/root/"
  $SUDO cp -a "$new/wheels/nvidia/nccl/include/." "$new/root/include/"
  $SUDO cp -a "$new/wheels/nvidia/nccl/lib/." "$new/root/lib/"
  $SUDO ln -sf libcudart.so.13 "$new/root/lib/libcudart.so"
  $SUDO ln -sf libnccl.so.2 "$new/root/lib/libnccl.so"
  echo $CUDA_WHEELS | $SUDO tee "$new/root/.wheels" >/dev/null
  if ! cuda_root_ok "$new/root"; then
    echo "setup: the CUDA root built in $new/root is incomplete (nvcc and ptxas must both be $CUDA_NVCC_VERSION)" >&2
    exit 1
  fi
  $SUDO rm -rf "$CUDA_ROOT"
  $SUDO mv "$new/root" "$CUDA_ROOT"
  $SUDO rm -rf "$new"
fi
