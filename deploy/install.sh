#!/bin/sh
# Installs autotuned as a systemd service: the daemon and CLI binaries, the
# configuration, the unit, the service user and group. Safe to run again
# (an existing configuration is kept). Build first:
#   bazel build //daemon:autotuned //client/cli:autotunectl \
#     //client/nccl_tuner:libautotuned_nccl_tuner.so
#
# Usage: deploy/install.sh [options]
#   --root=DIR       install under DIR instead of / (also: DESTDIR=DIR); a
#                    scratch root gets no user, group or systemctl calls
#   --prefix=DIR     binaries in DIR/bin, docs in DIR/share (/usr/local)
#   --daemon=PATH    the daemon binary (bazel-bin/daemon/autotuned)
#   --ctl=PATH       the CLI binary (bazel-bin/client/cli/autotunectl);
#                    --ctl= installs none
#   --tuner=PATH     the NCCL tuner plugin (bazel-bin/client/nccl_tuner/
#                    libautotuned_nccl_tuner.so, when built); --tuner= none
#   --user=NAME      service user (autotuned); --group=NAME its group and the
#                    socket's group (autotuned)
#   --no-users       do not create the user and group
#   --no-systemctl   do not call systemctl
#   --enable         systemctl enable autotuned;  --start  (re)start it now
#
# Installed (paths under --root):
#   PREFIX/bin/autotuned, PREFIX/bin/autotunectl       0755
#   PREFIX/lib/autotuned/libautotuned_nccl_tuner.so    0644 (the daemon's worker
#                    forces NCCL's choices through it; NCCL_TUNER_PLUGIN names
#                    it for jobs: docs/nccl_tuner.md)
#   /etc/autotuned/autotuned.conf                      0640, group GROUP
#   /etc/systemd/system/autotuned.service              0644
#   PREFIX/share/doc/autotuned/README.md, docs/*.md    0644 (README's links hold)
# The socket directory /run/autotuned (0750, group GROUP) and the cache
# directory /var/lib/autotuned are the unit's RuntimeDirectory= and
# StateDirectory=: systemd creates them with the right owner at start.
# deploy/uninstall.sh removes all of it.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
root=${DESTDIR:-}
prefix=/usr/local
daemon=$repo/bazel-bin/daemon/autotuned
ctl=$repo/bazel-bin/client/cli/autotunectl
tuner=$repo/bazel-bin/client/nccl_tuner/libautotuned_nccl_tuner.so
tuner_given=no
user=autotuned
group=autotuned
users=yes
systemctl=yes
enable=no
start=no

for arg in "$@"; do
  case $arg in
    --root=*) root=${arg#--root=} ;;
    --prefix=*) prefix=${arg#--prefix=} ;;
    --daemon=*) daemon=${arg#--daemon=} ;;
    --ctl=*) ctl=${arg#--ctl=} ;;
    --tuner=*) tuner=${arg#--tuner=}; tuner_given=yes ;;
    --user=*) user=${arg#--user=} ;;
    --group=*) group=${arg#--group=} ;;
    --no-users) users=no ;;
    --no-systemctl) systemctl=no ;;
    --enable) enable=yes ;;
    --start) start=yes ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "install: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done

root=${root%/}
if [ -n "$root" ]; then
  case $root in /*) ;; *) root=$(pwd)/$root ;; esac
  # A scratch root is not this system: its users and its systemd are not ours.
  if [ "$users" = yes ]; then echo "install: scratch root $root: no user or group created"; fi
  if [ "$systemctl" = yes ]; then echo "install: scratch root $root: systemctl not called"; fi
  users=no
  systemctl=no
fi

if [ ! -x "$daemon" ]; then
  echo "install: no daemon binary at $daemon; run: bazel build //daemon:autotuned //client/cli:autotunectl (or give --daemon=PATH)" >&2
  exit 1
fi
if [ -n "$ctl" ] && [ ! -x "$ctl" ]; then
  echo "install: no CLI binary at $ctl (give --ctl=PATH, or --ctl= for none)" >&2
  exit 1
fi
if [ -n "$tuner" ] && [ ! -f "$tuner" ]; then
  if [ "$tuner_given" = yes ]; then
    echo "install: no NCCL tuner plugin at $tuner (give --tuner=PATH, or --tuner= for none)" >&2
    exit 1
  fi
  tuner=""  # not built: NCCL's choices cannot be forced (docs/nccl_tuner.md)
fi
if [ "$(id -u)" != 0 ] && { [ -z "$root" ] || [ "$users" = yes ]; }; then
  echo "install: installing into / needs root (or use --root=DIR)" >&2
  exit 1
fi

if [ "$users" = yes ]; then
  if ! getent group "$group" >/dev/null; then
    groupadd --system "$group"
    echo "install: created group $group"
  fi
  if ! getent passwd "$user" >/dev/null; then
    useradd --system --gid "$group" --no-create-home --home-dir /var/lib/autotuned \
      --shell /usr/sbin/nologin --comment "autotuned daemon" "$user"
    echo "install: created user $user"
  fi
fi

install -d -m 0755 "$root$prefix/bin" "$root$prefix/share/doc/autotuned" \
  "$root/etc/systemd/system"
install -d -m 0750 "$root/etc/autotuned"
install -m 0755 "$daemon" "$root$prefix/bin/autotuned"
if [ -n "$ctl" ]; then install -m 0755 "$ctl" "$root$prefix/bin/autotunectl"; fi
if [ -n "$tuner" ]; then
  install -d -m 0755 "$root$prefix/lib/autotuned"
  install -m 0644 "$tuner" "$root$prefix/lib/autotuned/libautotuned_nccl_tuner.so"
fi
install -m 0644 "$repo/README.md" "$root$prefix/share/doc/autotuned/README.md"
install -d -m 0755 "$root$prefix/share/doc/autotuned/docs"
install -m 0644 "$repo"/docs/*.md "$root$prefix/share/doc/autotuned/docs/"

sed -e "s|/usr/local/bin/autotuned|$prefix/bin/autotuned|" \
    -e "s|/usr/local/share/doc/autotuned|$prefix/share/doc/autotuned|" \
    -e "s|^User=autotuned|User=$user|" -e "s|^Group=autotuned|Group=$group|" \
    "$repo/deploy/autotuned.service" > "$root/etc/systemd/system/autotuned.service.tmp"
chmod 0644 "$root/etc/systemd/system/autotuned.service.tmp"
mv "$root/etc/systemd/system/autotuned.service.tmp" "$root/etc/systemd/system/autotuned.service"

conf=$root/etc/autotuned/autotuned.conf
if [ -e "$conf" ]; then
  echo "install: keeping the existing $conf"
else
  sed -e "s|^unix_socket_group: \"autotuned\"|unix_socket_group: \"$group\"|" \
    "$repo/deploy/autotuned.conf" > "$conf"
  chmod 0640 "$conf"
fi
if [ "$users" = yes ]; then chgrp "$group" "$root/etc/autotuned" "$conf"; fi

# The installed binary must accept the installed configuration.
"$root$prefix/bin/autotuned" --config="$conf" --check_config >/dev/null

if [ "$systemctl" = yes ]; then
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    if [ "$enable" = yes ]; then systemctl enable autotuned.service; fi
    if [ "$start" = yes ]; then systemctl restart autotuned.service; fi
  else
    echo "install: systemd is not running here: unit installed, not loaded"
  fi
fi
echo "install: done (root ${root:-/}, prefix $prefix)"
