#!/bin/sh
# Writes the Python messages and gRPC stubs of proto/autotuned.proto into
# OUT_DIR/autotuned/_proto/ (autotuned_pb2.py, autotuned_pb2_grpc.py).
#
#   client/python/gen_stubs.sh client/python      # before `pip install client/python`
#
# The Bazel build runs the same script (//client/python:stubs), so the stubs
# are always made from the .proto and never edited by hand. The proto is
# mapped to the virtual path autotuned/_proto/ so that the generated gRPC
# module imports its messages as `autotuned._proto.autotuned_pb2`.
# Uses Debian's protoc and grpc_python_plugin (protobuf-compiler-grpc), or
# `python3 -m grpc_tools.protoc` where grpcio-tools is installed instead.
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 OUT_DIR [PATH_TO/autotuned.proto]" >&2
  exit 2
fi
out=$1
here=$(cd "$(dirname "$0")" && pwd)
proto=${2:-$here/../../proto/autotuned.proto}
proto_dir=$(cd "$(dirname "$proto")" && pwd)
mkdir -p "$out/autotuned/_proto"
out=$(cd "$out" && pwd)
cd "$proto_dir"
if [ -x /usr/bin/protoc ] && [ -x /usr/bin/grpc_python_plugin ]; then
  /usr/bin/protoc --proto_path=autotuned/_proto=. \
    --python_out="$out" --grpc_python_out="$out" \
    --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin \
    autotuned.proto
else
  python3 -m grpc_tools.protoc --proto_path=autotuned/_proto=. \
    --python_out="$out" --grpc_python_out="$out" \
    autotuned.proto
fi
