#!/bin/bash
# End to end on the CPU: a sim daemon, `autotunectl tune-nccl` writes the
# table, and the plugin loaded as NCCL loads it (nccl_tuner_probe) steers
# every size of every collective as the table's rows say; a daemon's answer
# for another world is not steered; then the same table asked again comes
# from the daemon's cache.
set -u
root=${TEST_SRCDIR:-.}/autotuned
daemon=$root/daemon/autotuned
cli=$root/client/cli/autotunectl
probe=$root/client/nccl_tuner/nccl_tuner_probe
lib=$root/client/nccl_tuner/libautotuned_nccl_tuner.so
dir=$(mktemp -d /tmp/autotuned-tune-nccl.XXXXXX)
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/served.sh
. "$(dirname "$0")/served.sh"
"$daemon" --backend=sim --socket="$dir/s.sock" --cache_dir="$dir/cache" > "$dir/log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null; rm -rf "$dir"' EXIT
ctl=("$cli" "--socket=$dir/s.sock" --connect_timeout=2s)
served "$pid" "the daemon died before it served" "${ctl[@]}"
"${ctl[@]}" tune-nccl --world=4 --out="$dir/table" --to=1MiB --factor=8 > "$dir/out" 2> "$dir/err" ||
  { cat "$dir/err" >&2; fail "tune-nccl exited $?"; }
head -1 "$dir/table" | grep -qx 'autotuned-nccl-table 1' || fail "no table header"
rows=$(grep -c '^[a-z_]* 4 1 ' "$dir/table")
[ "$rows" -ge 4 ] || fail "$rows rows for 4 ranks, want one or more per collective"
[ ! -e "$dir/table.tmp" ] || fail "the temporary file was left behind"
echo "table:"; cat "$dir/table"

# What the plugin applies, against the row that holds each size.
AUTOTUNED_NCCL_TABLE="$dir/table" "$probe" "$lib" 4 1 > "$dir/probe" || fail "probe failed"
checked=$(awk -v table="$dir/table" '
  BEGIN {
    while ((getline line < table) > 0) {
      n = split(line, f, " ")
      if (n != 8 || f[2] != "4") continue
      r = ++rows[f[1]]; lo[f[1], r] = f[4]; hi[f[1], r] = f[5]
      a[f[1], r] = f[6] == "default" ? "-" : f[6]
      p[f[1], r] = f[7] == "default" ? "-" : f[7]; ch[f[1], r] = f[8]
    }
  }
  {
    want = "- - 0"
    for (r = 1; r <= rows[$1]; ++r) {
      if ($2 + 0 >= lo[$1, r] + 0 && $2 + 0 <= hi[$1, r] + 0) {
        want = a[$1, r] " " p[$1, r] " " ch[$1, r]; break
      }
    }
    got = $3 " " $4 " " $5
    if (got != want) { print "MISMATCH " $0 " want " want; bad = 1 }
    ++n
  }
  END { print n; exit bad }' "$dir/probe") || fail "the plugin did not apply the table: $checked"
echo "the plugin applied the table at $(echo "$checked" | tail -1) (collective, size) points"

# A communicator of another shape is not steered.
AUTOTUNED_NCCL_TABLE="$dir/table" "$probe" "$lib" 2 1 > "$dir/probe2" || fail "probe failed"
if grep -v ' - - 0$' "$dir/probe2" | grep -q .; then fail "a 2-rank communicator was steered"; fi

# Asked again, every size comes from the daemon's cache, and the table is the same.
"${ctl[@]}" tune-nccl --world=4 --out="$dir/table2" --to=1MiB --factor=8 > /dev/null 2> "$dir/err2" ||
  fail "second tune-nccl exited $?"
grep -q CACHED "$dir/err2" || fail "the second run measured again: $(head -3 "$dir/err2")"
cmp -s "$dir/table" "$dir/table2" || fail "the cached table differs"
echo "PASS: tune-nccl on the sim wrote a table the plugin applies; cached on the second run"
