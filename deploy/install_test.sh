#!/bin/bash
# The systemd packaging, without touching the real system:
#  1. install.sh into a scratch root puts every file in place with its mode,
#     the installed daemon accepts the installed configuration, and a second
#     install keeps an edited configuration;
#  2. systemd-analyze verify passes on the installed unit (in a second scratch
#     root holding systemd's own units), and fails on a broken copy of it;
#  3. uninstall.sh --purge leaves the scratch root empty.
set -euo pipefail

runfiles=${TEST_SRCDIR:-$PWD/..}/autotuned
tmp=${TEST_TMPDIR:-$(mktemp -d)}
daemon=$runfiles/daemon/autotuned
ctl=$runfiles/client/cli/autotunectl
tuner=$runfiles/client/nccl_tuner/libautotuned_nccl_tuner.so
install=$runfiles/deploy/install.sh
uninstall=$runfiles/deploy/uninstall.sh

fail() { echo "FAIL: $*" >&2; exit 1; }
expect_file() {  # path mode
  [ -f "$1" ] || fail "missing $1"
  [ "$(stat -c %a "$1")" = "$2" ] || fail "$1 has mode $(stat -c %a "$1"), want $2"
}

# --- 1. install into a scratch root -----------------------------------------
root=$tmp/root
rm -rf "$root"
mkdir -p "$root"
out=$("$install" --root="$root" --daemon="$daemon" --ctl="$ctl" --tuner="$tuner")
echo "$out"
grep -q "scratch root $root: no user or group created" <<<"$out" || fail "useradd not skipped"
grep -q "scratch root $root: systemctl not called" <<<"$out" || fail "systemctl not skipped"
expect_file "$root/usr/local/bin/autotuned" 755
expect_file "$root/usr/local/bin/autotunectl" 755
expect_file "$root/usr/local/lib/autotuned/libautotuned_nccl_tuner.so" 644
expect_file "$root/etc/autotuned/autotuned.conf" 640
expect_file "$root/etc/systemd/system/autotuned.service" 644
expect_file "$root/usr/local/share/doc/autotuned/README.md" 644
expect_file "$root/usr/local/share/doc/autotuned/docs/operations.md" 644
[ "$(stat -c %a "$root/etc/autotuned")" = 750 ] || fail "/etc/autotuned is not 0750"
cmp -s "$daemon" "$root/usr/local/bin/autotuned" || fail "the daemon binary differs"
grep -q '^ExecStart=/usr/local/bin/autotuned --config=/etc/autotuned/autotuned.conf$' \
  "$root/etc/systemd/system/autotuned.service" || fail "ExecStart"
out=$("$root/usr/local/bin/autotuned" --config="$root/etc/autotuned/autotuned.conf" --check_config)
grep -q 'unix_socket_group: "autotuned"' <<<"$out" || fail "the installed configuration"
# A stop takes at most drain_timeout_ms + 6 s (daemon/ops/lifecycle/lifecycle.h):
# within the unit's TimeoutStopSec, so systemd never has to SIGKILL it.
drain_ms=$(sed -n 's/^drain_timeout_ms: \([0-9]*\)$/\1/p' <<<"$out")
stop_s=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)$/\1/p' "$root/etc/systemd/system/autotuned.service")
[ -n "$drain_ms" ] && [ -n "$stop_s" ] || fail "drain_timeout_ms or TimeoutStopSec not found"
[ $((drain_ms / 1000 + 6)) -lt "$stop_s" ] ||
  fail "a stop may take $((drain_ms / 1000 + 6)) s, TimeoutStopSec is $stop_s"

# Another prefix and user are carried into the unit.
alt=$tmp/alt
rm -rf "$alt"
"$install" --root="$alt" --prefix=/opt/autotuned --user=svc --group=gpu \
  --daemon="$daemon" --ctl= --tuner= >/dev/null
grep -q '^ExecStart=/opt/autotuned/bin/autotuned ' "$alt/etc/systemd/system/autotuned.service" \
  || fail "prefix not in ExecStart"
grep -q '^User=svc$' "$alt/etc/systemd/system/autotuned.service" || fail "User="
grep -q '^unix_socket_group: "gpu"$' "$alt/etc/autotuned/autotuned.conf" || fail "group"
[ ! -e "$alt/opt/autotuned/bin/autotunectl" ] || fail "--ctl= installed a CLI"
[ ! -e "$alt/opt/autotuned/lib" ] || fail "--tuner= installed a plugin"
"$install" --root="$alt" --daemon="$daemon" --tuner="$alt/none.so" >/dev/null 2>&1 &&
  fail "a --tuner that does not exist was accepted"
"$uninstall" --root="$alt" --prefix=/opt/autotuned --purge >/dev/null
[ -z "$(ls -A "$alt")" ] || fail "left behind in $alt: $(find "$alt" -mindepth 1)"

# Reinstalling keeps an edited configuration.
echo 'log_level: "debug"' >> "$root/etc/autotuned/autotuned.conf"
out=$("$install" --root="$root" --daemon="$daemon" --ctl="$ctl")
grep -q "keeping the existing" <<<"$out" || fail "reinstall did not keep the configuration"
grep -q 'log_level: "debug"' "$root/etc/autotuned/autotuned.conf" || fail "configuration overwritten"

# --- 2. systemd-analyze verify ----------------------------------------------
if ! systemd-analyze --version >/dev/null 2>&1; then
  echo "SKIPPED: systemd-analyze cannot run here (install the systemd package: deploy/setup.sh)" >&2
else
  vroot=$tmp/verify-root
  rm -rf "$vroot"
  mkdir -p "$vroot/usr/lib/systemd" "$vroot/usr/bin"
  # systemd's own units (targets, modprobe@.service) and the ExecReload tool.
  cp -a /usr/lib/systemd/system "$vroot/usr/lib/systemd/"
  cp /usr/bin/kill "$vroot/usr/bin/kill"
  ln -s usr/bin "$vroot/bin"
  "$install" --root="$vroot" --daemon="$daemon" --ctl="$ctl" >/dev/null
  unit=/etc/systemd/system/autotuned.service
  verify=$(cd "$tmp" && systemd-analyze verify --root="$vroot" "$unit" 2>&1) \
    || fail "systemd-analyze verify: $verify"
  # It prints warnings and still exits 0: any output is a finding.
  [ -z "$verify" ] || fail "systemd-analyze verify: $verify"
  echo "systemd-analyze verify: clean"

  # The check can fail: a misspelt directive and a missing binary are caught.
  sed -e 's/^NoNewPrivileges=yes/NoNewPrivilege=yes/' "$vroot$unit" > "$vroot$unit.tmp"
  mv "$vroot$unit.tmp" "$vroot$unit"
  rm "$vroot/usr/local/bin/autotuned"
  verify=$(cd "$tmp" && systemd-analyze verify --root="$vroot" "$unit" 2>&1) || true
  grep -q "Unknown key name 'NoNewPrivilege'\|Unknown key 'NoNewPrivilege'" <<<"$verify" \
    || fail "a misspelt directive went unnoticed: $verify"
  grep -q "is not executable" <<<"$verify" || fail "a missing binary went unnoticed: $verify"
fi

# --- 3. uninstall ---------------------------------------------------------
"$uninstall" --root="$root"
[ -f "$root/etc/autotuned/autotuned.conf" ] || fail "uninstall without --purge removed the configuration"
[ ! -e "$root/usr/local/bin/autotuned" ] || fail "the binary is still there"
mkdir -p "$root/var/lib/autotuned/cache"   # as the running service would leave it
touch "$root/var/lib/autotuned/cache/0123.entry"
"$uninstall" --root="$root" --purge
left=$(find "$root" -mindepth 1)
[ -z "$left" ] || fail "left behind after uninstall --purge: $left"
echo "PASS"
