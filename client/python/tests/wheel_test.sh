#!/bin/sh
# The wheel as a user gets it: build_wheel.sh builds it; a fresh venv of
# Debian's python3 (no system site packages) installs it with its
# dependencies at their floors (grpcio 1.51.1, protobuf 4.21.12) and
# types-protobuf, offline from the wheels deploy/setup.sh keeps in
# /opt/autotuned/wheels ($AUTOTUNED_WHEELS overrides); then `import
# autotuned` works, its version is VERSION's, the wheel holds the .pyi and
# py.typed and no compiled library, and mypy (the venv's, pointed at the
# fresh venv) accepts a user's script and rejects one with a wrong argument
# and a misspelt field, naming both.
set -eu
venv=${AUTOTUNED_VENV:-/opt/autotuned/venv}
wheels=${AUTOTUNED_WHEELS:-/opt/autotuned/wheels}
src=$TEST_SRCDIR/autotuned
tmp=${TEST_TMPDIR:-$(mktemp -d)}
export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
fail() { echo "FAIL: $*" >&2; exit 1; }

"$src/client/python/build_wheel.sh" "$tmp/dist"
version=$(tr -d '[:space:]' < "$src/VERSION")
wheel=$tmp/dist/autotuned-$version-py3-none-any.whl
[ -f "$wheel" ] || fail "no $wheel"
files=$(unzip -Z1 "$wheel")
for f in autotuned/py.typed autotuned/_version.py autotuned/_proto/autotuned_pb2.pyi \
         autotuned/_proto/autotuned_pb2_grpc.pyi autotuned/inductor/__init__.py autotuned/plot.py; do
  echo "$files" | grep -qx "$f" || fail "$f not in the wheel"
done
if echo "$files" | grep '\.so$'; then fail "a compiled library in the pure-Python wheel"; fi

/usr/bin/python3 -m venv "$tmp/user"
py=$tmp/user/bin/python
"$py" -m pip install -q --no-index --find-links "$wheels" "$wheel[typing]" ||
  fail "pip install of the wheel from $wheels (deploy/setup.sh downloads its dependencies there)"
"$py" -m pip list
got=$(cd "$tmp" && "$py" -c "import autotuned; autotuned.Client; print(autotuned.__version__)")
[ "$got" = "$version" ] || fail "autotuned.__version__ is '$got', VERSION says '$version'"
echo "import autotuned: $got"

cat > "$tmp/good.py" <<'EOF'
from autotuned import Client, problem


def winner(daemon: Client) -> str:
    answer = daemon.tune([problem("all_reduce", "float32", count=1 << 18,
                                  candidates=["all_reduce/one_shot", "all_reduce/two_shot"])])
    return answer.results[0].winner
EOF
cat > "$tmp/bad.py" <<'EOF'
from autotuned import Client, problem


def winner(daemon: Client) -> str:
    answer = daemon.tune([problem("all_reduce", "float32", count="1MiB",
                                  candidates=["all_reduce/one_shot"])])
    return answer.results[0].winnr
EOF
mypy() {
  (cd "$tmp" && "$venv/bin/mypy" --strict --no-incremental --python-executable "$py" "$@")
}
mypy good.py || fail "mypy rejects a correct use of the client"
if mypy bad.py > "$tmp/bad.out" 2>&1; then fail "mypy accepts bad.py"; fi
cat "$tmp/bad.out"
grep -q 'bad.py:5: error: Argument "count" to "problem" has incompatible type "str"; expected "int"' \
  "$tmp/bad.out" || fail "mypy did not name the wrong argument"
grep -q 'bad.py:7: error: "ProblemResult" has no attribute "winnr"' "$tmp/bad.out" ||
  fail "mypy did not find the misspelt field in the generated types"
echo "PASS"
