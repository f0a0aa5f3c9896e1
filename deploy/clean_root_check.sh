#!/bin/bash
# The README's two commands on a fresh Debian 12: debootstraps a new root,
# clones this repository at COMMIT into it (/src/autotuned) and runs, as root
# inside it (chroot),
#   ./deploy/setup.sh && ./deploy/demo.sh
#   ./deploy/setup.sh && bazel test //...
# timing each. --no-cuda runs both with AUTOTUNED_CUDA_ROOT=none in the
# environment: setup.sh installs no CUDA and the build has no cuda backend
# (docs/operations.md#building-without-cuda). Writes OUTDIR/log.txt (all
# output) and OUTDIR/summary.txt (commit, machine, date, time and exit status
# of each command). Unmounts and deletes the root on exit unless --keep.
#
# Usage (root, about 12 GB free under WORKDIR; needs the network):
#   deploy/clean_root_check.sh [--no-cuda] [--keep] [--workdir=DIR] OUTDIR [COMMIT]
# COMMIT defaults to HEAD.
set -euo pipefail

cuda_env=""
keep=0
workdir=/var/tmp
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --no-cuda) cuda_env="AUTOTUNED_CUDA_ROOT=none" ;;
    --keep) keep=1 ;;
    --workdir=*) workdir=${1#--workdir=} ;;
    *) echo "clean_root_check: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ $# -lt 1 || $# -gt 2 ]]; then
  sed -n '2,16p' "$0" >&2
  exit 2
fi
out=$(mkdir -p "$1" && cd "$1" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$repo" rev-parse "${2:-HEAD}")
mirror=http://deb.debian.org/debian

root=$(mktemp -d "$workdir/autotuned-clean-root.XXXXXX")
chmod 755 "$root"  # the root's /: every user of the tests must get through it
log=$out/log.txt
summary=$out/summary.txt
: >"$log"
say() { echo "clean_root_check: $*" | tee -a "$log" "$summary"; }

cleanup() {
  set +e
  # Whatever still runs inside the root (the Bazel server, a daemon): by pid.
  for p in /proc/[0-9]*; do
    if [[ $(readlink "$p/root" 2>/dev/null) == "$root" ]]; then kill -9 "${p#/proc/}"; fi
  done
  sleep 1
  # Every mount in the root, deepest first: the ones made here and what the
  # tests may have left (ip netns's /run/netns and its namespace files).
  awk -v r="$root" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/mounts | sort -r |
    while read -r m; do umount -l "$m"; done
  if findmnt -R "$root" >/dev/null 2>&1 || grep -q " $root/" /proc/mounts; then
    echo "clean_root_check: $root still has mounts; left in place" >&2
  elif [[ $keep == 0 ]]; then
    rm -rf --one-file-system "$root"
  else
    echo "clean_root_check: root kept in $root" >&2
  fi
}
trap cleanup EXIT

: >"$summary"
say "commit $commit"
cpu=$(lscpu | sed -n 's/^Model name: *//p')
mem=$(free -g | awk '/^Mem:/ {print $2}')
say "machine $(hostname): $(nproc) cores ($cpu), $mem GiB"
say "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "configuration: ${cuda_env:-CUDA from the pinned packages of deploy/setup.sh}"

if ! command -v debootstrap >/dev/null; then
  apt-get update -qq >>"$log" 2>&1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >>"$log" 2>&1
fi
t0=$(date +%s)
debootstrap --variant=minbase bookworm "$root" "$mirror" >>"$log" 2>&1
say "debootstrap bookworm (minbase): $(($(date +%s) - t0)) s"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# Whatever this machine trusts for TLS (a proxy's own CA, say) is trusted in
# the root too: the ca-certificates package that setup.sh installs adds it.
mkdir -p "$root/usr/local/share/ca-certificates"
cp /etc/ssl/certs/ca-certificates.crt "$root/usr/local/share/ca-certificates/host.crt"

# The root's / a mount point, as on any installed system (`ip netns add`,
# which the namespaced fleet test runs, remounts / as a slave).
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
mount -t tmpfs shm "$root/dev/shm"

git clone -q --no-local "$repo" "$root/src/autotuned" >>"$log" 2>&1
git -C "$root/src/autotuned" checkout -q "$commit"

# Each README command in a login-like environment of the root.
run() {
  local name=$1 cmd=$2 t rc
  echo "==== $name: $cmd" >>"$log"
  t=$(date +%s)
  set +e
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin $cuda_env \
    /bin/bash -c "cd /src/autotuned && $cmd" >>"$log" 2>&1
  rc=$?
  set -e
  say "$name: '$cmd': exit $rc, $(($(date +%s) - t)) s"
  return $rc
}
status=0
run "first command" "./deploy/setup.sh && ./deploy/demo.sh" || status=1
run "second command" "./deploy/setup.sh && bazel test //..." || status=1
grep -E "^//.* (PASSED|FAILED|SKIPPED|NO STATUS|TIMEOUT)|^Executed .* tests?|test(s)? pass" "$log" \
  >"$out/tests.txt" || true
say "result: $([[ $status == 0 ]] && echo PASS || echo FAIL)"
exit $status
