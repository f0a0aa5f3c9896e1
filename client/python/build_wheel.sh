#!/bin/sh
# Builds the wheel of the Python package: OUT_DIR/autotuned-VERSION-py3-none-any.whl.
#
#   client/python/build_wheel.sh dist      # then: pip install dist/autotuned-*.whl (docs/python.md)
#
# A pure-Python wheel with its generated modules inside (gen_stubs.sh: the
# gRPC stubs, their .pyi, _version.py from the repository's VERSION), made
# from a copy of the package so that the source tree stays as it is. Offline:
# the build backend is the setuptools and wheel of $PYTHON (default: the venv
# deploy/setup.sh makes, which sees Debian's python3-setuptools and
# python3-wheel), with no isolated build environment to download.
set -eu
case "${1:-}" in
  -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
if [ $# -ne 1 ]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
venv=${AUTOTUNED_VENV:-/opt/autotuned/venv}
python=${PYTHON:-$venv/bin/python}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/src"
(cd "$here" && find autotuned -name '*.py' -o -name py.typed | grep -v '/_proto/autotuned_pb2' |
  grep -v '^autotuned/_version.py$' | tar -chf - -T - README.md pyproject.toml) |
  (cd "$work/src" && tar -xf -)
"$here/gen_stubs.sh" "$work/src" "$here/../../proto/autotuned.proto" "$here/../../VERSION"
# Building from a copy keeps setuptools' build/ and egg-info out of the tree.
"$python" -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir "$out" "$work/src"
ls "$out"/autotuned-"$(cat "$here/../../VERSION" | tr -d '[:space:]')"-py3-none-any.whl
