#!/bin/sh
# ruff and mypy over the Python client as client/python/pyproject.toml
# configures them (ruff: package, tests, examples, and the scripts of bench/
# and docs/ by their ruff.toml; mypy: the package). The
# tools come from the venv deploy/setup.sh makes ($AUTOTUNED_VENV overrides),
# at the versions it pins. Exits non-zero on any finding, listing them all.
set -u
venv=${AUTOTUNED_VENV:-/opt/autotuned/venv}
for tool in ruff mypy; do
  if [ ! -x "$venv/bin/$tool" ]; then
    echo "FAIL: no $tool in $venv/bin: run deploy/setup.sh (it installs the pinned ruff and mypy there)" >&2
    exit 1
  fi
done
echo "$("$venv/bin/ruff" --version); $("$venv/bin/mypy" --version)"
status=0
cd "$TEST_SRCDIR/autotuned/client/python" || exit 1
echo "== ruff check client/python"
"$venv/bin/ruff" check --no-cache . || status=1
echo "== ruff check bench docs"
(cd ../.. && "$venv/bin/ruff" check --no-cache bench docs) || status=1
echo "== mypy (files and settings from pyproject.toml)"
"$venv/bin/mypy" --cache-dir="${TEST_TMPDIR:-/tmp}/mypy_cache" || status=1
if [ "$status" != 0 ]; then
  echo "FAIL: findings above (ruff check --fix fixes some; see client/python/pyproject.toml)" >&2
fi
exit "$status"
