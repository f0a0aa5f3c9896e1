#!/bin/sh
# Installs everything autotuned needs to build, test and run on Debian 12,
# from Debian's own archive (Bazel 4.2.3 included: the build downloads
# nothing). Safe to run any number of times. Needs root (or sudo).
# systemd: systemd-analyze, which //deploy:install_test runs on the unit;
# passwd: useradd and groupadd for deploy/install.sh and the socket-group test.
# iproute2, iptables, libnetfilter-queue-dev: the namespaced fleet test and
# benchmark (hosts in network namespaces; loss and partitions as firewall
# rules, delay through an NFQUEUE delayer: tests/fleet/README.md).
# (fuzz/run.sh installs clang for itself; the test suite does not need it.)
# python3-venv, python3-pip, python3-pytest: the Python client's tests; PyTorch
# 2.11 from PyPI goes into the venv /opt/autotuned/venv (about 2.5 min and
# 4.6 GB with its CUDA wheels; it sees Debian's grpcio and protobuf), used by
# the tests of the torch.distributed and Inductor integration, with ruff and
# mypy (pinned) for the Python client's lint test.
# libhiredis-dev: the fleet cache's Redis client; redis-server: the server the
# fleet cache's tests and benchmark start for themselves (never as a system
# service: the package's own service is stopped and left disabled).
set -eu

PACKAGES="bazel-bootstrap bazel-rules-java \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
  libspdlog-dev libabsl-dev catch2 zlib1g-dev \
  python3-grpcio python3-protobuf python3-venv python3-pip python3-pytest \
  g++ git ca-certificates \
  systemd passwd \
  iproute2 iptables libnetfilter-queue-dev \
  libhiredis-dev redis-server"

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

if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: CUDA toolkit not found in /usr/local/cuda: the kernels/ library needs nvcc to build" >&2
  exit 1
fi
