#!/bin/sh
# Writes the package's generated modules into OUT_DIR/autotuned/:
#   _proto/autotuned_pb2.py, _proto/autotuned_pb2_grpc.py   messages and gRPC stubs of proto/autotuned.proto
#   _proto/autotuned_pb2.pyi, _proto/autotuned_pb2_grpc.pyi their types (mypy-protobuf)
#   _version.py                                              __version__, from the repository's VERSION
#
#   client/python/gen_stubs.sh client/python      # to use the package from the source tree
#
# build_wheel.sh and the Bazel build (//client/python:stubs) run the same
# script, so these files are always made from the .proto and VERSION and
# never edited by hand. The proto is mapped to the virtual path
# autotuned/_proto/ so that the generated gRPC module imports its messages as
# `autotuned._proto.autotuned_pb2`.
# Uses Debian's protoc 3.21 and grpc_python_plugin 1.51 (protobuf-compiler-grpc;
# pyproject.toml's dependency floors are these versions), and protoc-gen-mypy
# from mypy-protobuf, which deploy/setup.sh pins into /opt/autotuned/venv
# ($AUTOTUNED_VENV overrides; else found on PATH).
set -eu
if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  echo "usage: $0 OUT_DIR [PATH_TO/autotuned.proto [PATH_TO/VERSION]]" >&2
  exit 2
fi
out=$1
here=$(cd "$(dirname "$0")" && pwd)
proto=${2:-$here/../../proto/autotuned.proto}
version_file=${3:-$here/../../VERSION}
venv=${AUTOTUNED_VENV:-/opt/autotuned/venv}
for tool in protoc-gen-mypy protoc-gen-mypy_grpc; do
  if [ ! -x "$venv/bin/$tool" ] && ! command -v "$tool" >/dev/null; then
    echo "$0: no $tool in $venv/bin or on PATH: run deploy/setup.sh, or pip install mypy-protobuf==3.4.0" >&2
    exit 1
  fi
done
PATH=$venv/bin:$PATH

version=$(tr -d '[:space:]' < "$version_file")
case $version in
  '' | *[!0-9A-Za-z.+-]*) echo "$0: $version_file: bad version '$version'" >&2; exit 1 ;;
esac
mkdir -p "$out/autotuned/_proto"
out=$(cd "$out" && pwd)
printf '"""The project'"'"'s version (generated from VERSION by gen_stubs.sh)."""\n__version__ = "%s"\n' \
  "$version" > "$out/autotuned/_version.py"

cd "$(dirname "$proto")"
/usr/bin/protoc --proto_path=autotuned/_proto=. \
  --python_out="$out" --grpc_python_out="$out" \
  --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin \
  --mypy_out=quiet:"$out" --mypy_grpc_out=quiet:"$out" \
  "$(basename "$proto")"
