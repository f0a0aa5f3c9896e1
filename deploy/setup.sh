#!/bin/sh
# Installs everything autotuned needs to build, test and run on Debian 12,
# from Debian's own archive (Bazel 4.2.3 included: the build downloads
# nothing). Safe to run any number of times. Needs root (or sudo).
# systemd: systemd-analyze, which //deploy:install_test runs on the unit;
# passwd: useradd and groupadd for deploy/install.sh and the socket-group test;
# procps: kill(1), which //deploy:install_test puts in its scratch root.
# iproute2, iptables, libnetfilter-queue-dev: the namespaced fleet test and
# benchmark (hosts in network namespaces; loss and partitions as firewall
# rules, delay through an NFQUEUE delayer: tests/fleet/README.md).
# (fuzz/run.sh installs clang for itself; the test suite does not need it.)
# python3-venv, python3-pip, python3-pytest: the Python client's tests;
# python3-dev: Python.h, which torch.compile's C++ code on CPU includes; PyTorch
# 2.11 from PyPI goes into the venv /opt/autotuned/venv (about 2.5 min and
# 4.6 GB with its CUDA wheels; it sees Debian's grpcio and protobuf), used by
# the tests of the torch.distributed and Inductor integration, with ruff,
# mypy, mypy-protobuf and types-protobuf (pinned) for the Python client's lint
# test and generated types; the wheels of the Python package's dependency floors.
# libhiredis-dev: the fleet cache's Redis client; redis-server: the server the
# fleet cache's tests and benchmark start for themselves (never as a system
# service: the package's own service is stopped and left disabled).
# libssl-dev: OpenSSL, under gRPC's TLS and the fleet cache's TLS to Redis;
# openssl: the command the TLS tests make their certificates with.
#   deploy/setup.sh          (no arguments; --help: this text)
set -eu
case "${1:-}" in
  -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  "") ;;
  *) echo "setup: no arguments taken, got \"$1\" (see --help)" >&2; exit 2 ;;
esac

PACKAGES="bazel-bootstrap bazel-rules-java \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
  libspdlog-dev libabsl-dev catch2 zlib1g-dev \
  python3-grpcio python3-protobuf python3-venv python3-pip python3-pytest python3-dev \
  g++ git ca-certificates \
  systemd passwd procps \
  iproute2 iptables libnetfilter-queue-dev \
  libhiredis-dev redis-server libssl-dev openssl"

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

# Debian's redis-server package enables a system service; autotuned needs none
# (its tests start their own redis-server on a socket in a temporary dir).
if command -v systemctl >/dev/null 2>&1 &&
   systemctl is-enabled redis-server.service >/dev/null 2>&1; then
  echo "setup: disabling the redis-server system service"
  $SUDO systemctl disable --now redis-server.service >/dev/null 2>&1 || true
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
# //client/python:python_lint_test runs them from the venv. mypy-protobuf
# writes the .pyi of the generated modules (client/python/gen_stubs.sh);
# 3.4.0 and types-protobuf 4.21 are the releases that go with Debian's
# protobuf 4.21 (mypy-protobuf 3.5 wants protobuf 4.23).
RUFF_VERSION=0.17.6
MYPY_VERSION=2.4.1
MYPY_PROTOBUF_VERSION=3.4.0
TYPES_PROTOBUF_VERSION=4.21.0.7
if ! "$VENV/bin/ruff" --version 2>/dev/null | grep -qx "ruff $RUFF_VERSION" ||
   ! "$VENV/bin/mypy" --version 2>/dev/null | grep -q "^mypy $MYPY_VERSION " ||
   ! "$VENV/bin/protoc-gen-mypy" --version 2>/dev/null | grep -q "mypy-protobuf $MYPY_PROTOBUF_VERSION" ||
   ! "$VENV/bin/pip" show types-protobuf 2>/dev/null | grep -qx "Version: $TYPES_PROTOBUF_VERSION"; then
  echo "setup: installing ruff, mypy, mypy-protobuf and types-protobuf into $VENV"
  $SUDO "$VENV/bin/pip" install -q --progress-bar off "ruff==$RUFF_VERSION" "mypy==$MYPY_VERSION" \
    "mypy-protobuf==$MYPY_PROTOBUF_VERSION" "types-protobuf==$TYPES_PROTOBUF_VERSION"
else
  echo "setup: ruff, mypy, mypy-protobuf and types-protobuf present in $VENV"
fi

# matplotlib, for autotuned.plot and its test (Debian's python3-matplotlib is
# built for the numpy 1 that the venv's numpy 2 replaces).
MATPLOTLIB_VERSION=3.10.7
if ! "$VENV/bin/python" -c "import matplotlib; assert matplotlib.__version__ == '$MATPLOTLIB_VERSION'" >/dev/null 2>&1; then
  echo "setup: installing matplotlib $MATPLOTLIB_VERSION into $VENV"
  $SUDO "$VENV/bin/pip" install -q --progress-bar off "matplotlib==$MATPLOTLIB_VERSION"
else
  echo "setup: matplotlib $MATPLOTLIB_VERSION present in $VENV"
fi

# The wheels //client/python:wheel_test installs into a venv of its own
# without the network: the dependency floors of the Python package
# (client/python/pyproject.toml) and the types users check it with.
WHEELS=/opt/autotuned/wheels
FLOOR_WHEELS="grpcio==1.51.1 protobuf==4.21.12 types-protobuf==$TYPES_PROTOBUF_VERSION"
if [ "$(ls "$WHEELS"/grpcio-1.51.1-*.whl "$WHEELS"/protobuf-4.21.12-*.whl \
         "$WHEELS"/types_protobuf-"$TYPES_PROTOBUF_VERSION"-*.whl 2>/dev/null | wc -l)" != 3 ]; then
  echo "setup: downloading $FLOOR_WHEELS into $WHEELS"
  $SUDO "$VENV/bin/pip" download -q --progress-bar off --only-binary=:all: --no-deps \
    -d "$WHEELS" $FLOOR_WHEELS
else
  echo "setup: $FLOOR_WHEELS present in $WHEELS"
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
