#!/bin/sh
# Builds the libFuzzer targets with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer on) and runs each for a fixed time over the
# committed corpus; fails on any crash, leak, timeout or broken contract.
# Afterwards fuzz/corpus/<target>/ is replaced by the smallest set of inputs
# (old and new) with the same coverage, and a summary is written to
# fuzz/results/last_run.txt.
#
#   fuzz/run.sh [SECONDS_PER_TARGET]        (default 60; --help: this text)
#
# Needs clang and libFuzzer (Debian 12: clang-14, libclang-rt-14-dev) and
# pkg-config; installs them with apt-get when missing and run as root. The
# targets compile the sources they need straight from the tree against
# Debian's protobuf and abseil, so the Bazel build needs no clang.
#   validate_fuzzer  ValidateTune / ValidateSweep on a TuneRequest
#   config_fuzzer    the configuration text parser and ValidateConfig
set -eu
case "${1:-}" in
  -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
seconds=${1:-60}
# libFuzzer reads -max_total_time=0 (and any text) as no limit at all.
case "$seconds" in
  ''|*[!0-9]*|0|0*)
    echo "fuzz: SECONDS_PER_TARGET must be a whole number of seconds from 1, got \"$seconds\" (see --help)" >&2
    exit 2 ;;
esac
if [ $# -gt 1 ]; then
  echo "fuzz: one argument at most, SECONDS_PER_TARGET (see --help)" >&2
  exit 2
fi
cd "$(dirname "$0")/.."

need=""
command -v clang++ >/dev/null || need="$need clang"
command -v pkg-config >/dev/null || need="$need pkg-config"
if ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  need="$need libclang-rt-14-dev"
fi
if [ -n "$need" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "fuzz: missing:$need (apt-get install them, or run as root)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need
fi

build=${TMPDIR:-/tmp}/autotuned-fuzz-build
rm -rf "$build"
mkdir -p "$build/gen/config" "$build/work"

# Generated sources, as the Bazel genrules make them.
/usr/bin/protoc -I. --cpp_out="$build/gen" proto/autotuned.proto config/config.proto
{
  echo '#include "config/default_config.h"'
  echo 'namespace autotuned { namespace config {'
  echo 'extern const char kDefaultConfigText[] = {'
  od -An -v -tx1 config/default.textproto | sed -e 's/\([0-9a-f][0-9a-f]\)/0x\1,/g'
  echo '0x00};'
  echo 'extern const size_t kDefaultConfigTextSize = sizeof(kDefaultConfigText) - 1;'
  echo '}}'
} > "$build/gen/config/default_config.cc"

flags="-std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I. -I$build/gen"
libs=$(pkg-config --libs protobuf absl_status absl_statusor absl_strings absl_str_format \
  absl_flat_hash_map absl_hash absl_raw_hash_set)
common="config/config_loader.cc common/regular_file.cc $build/gen/config/config.pb.cc $build/gen/config/default_config.cc"

echo "fuzz: building with $(clang++ --version | head -1)"
# shellcheck disable=SC2086
clang++ $flags -o "$build/config_fuzzer" fuzz/config_fuzzer.cc $common $libs
# shellcheck disable=SC2086
clang++ $flags -o "$build/validate_fuzzer" fuzz/validate_fuzzer.cc $common \
  daemon/coordinate/request/validate.cc daemon/coordinate/request/validate_problem.cc \
  daemon/coordinate/request/validate_group.cc daemon/coordinate/request/validate_options.cc \
  daemon/coordinate/request/validate_run.cc daemon/coordinate/request/enums.cc \
  daemon/coordinate/request/checks.cc daemon/measure/catalogue/catalogue.cc daemon/common/problem.cc \
  daemon/common/escape.cc common/digest.cc \
  "$build/gen/proto/autotuned.pb.cc" $libs

# Seeds: text forms, encoded to what each target reads.
mkdir -p "$build/seeds/validate" "$build/seeds/config"
for f in fuzz/seeds/validate/*.txtpb; do
  /usr/bin/protoc -I. --encode=autotuned.v1.TuneRequest proto/autotuned.proto \
    < "$f" > "$build/seeds/validate/$(basename "$f" .txtpb)"
done
cp fuzz/seeds/config/* config/default.textproto deploy/autotuned.conf "$build/seeds/config/"

summary=$build/summary.txt
{
  echo "# fuzz/run.sh $seconds"
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "# compiler: $(clang++ --version | head -1)"
} > "$summary"

status=0
for target in validate config; do
  corpus=fuzz/corpus/$target
  mkdir -p "$corpus" "$build/work/$target" "$build/artifacts/$target"
  log=$build/$target.log
  echo "fuzz: ${target}_fuzzer for ${seconds}s"
  if ! "$build/${target}_fuzzer" -max_total_time="$seconds" -timeout=10 \
       -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
       -artifact_prefix="$build/artifacts/$target/" \
       "$build/work/$target" "$corpus" "$build/seeds/$target" > "$log" 2>&1; then
    status=1
    echo "fuzz: ${target}_fuzzer FAILED; the input is in $build/artifacts/$target/" >&2
    tail -40 "$log" >&2
  fi
  # The committed corpus becomes the smallest set with the same coverage.
  mkdir -p "$build/merged/$target"
  "$build/${target}_fuzzer" -merge=1 "$build/merged/$target" "$corpus" \
    "$build/work/$target" "$build/seeds/$target" > "$build/$target.merge.log" 2>&1
  rm -f "$corpus"/*
  cp "$build/merged/$target"/* "$corpus/"
  crashes=$(find "$build/artifacts/$target" -type f | wc -l)
  {
    echo "${target}_fuzzer: $(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') runs in ${seconds}s," \
      "$(grep -E '^stat::peak_rss_mb' "$log" | awk '{print $2}') MB peak RSS," \
      "$(grep -oE 'cov: [0-9]+' "$log" | tail -1) edges," \
      "corpus $(find "$corpus" -type f | wc -l) files ($(cat "$corpus"/* | wc -c) bytes)," \
      "crashes/leaks/timeouts: $crashes"
  } >> "$summary"
done

mkdir -p fuzz/results
cp "$summary" fuzz/results/last_run.txt
cat "$summary"
if [ "$status" != 0 ]; then echo "fuzz: FAILED" >&2; fi
exit $status
