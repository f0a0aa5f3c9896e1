#!/bin/sh
# Removes what deploy/install.sh installed. Safe to run again.
#
# Usage: deploy/uninstall.sh [options]
#   --root=DIR      the root given to install.sh (also: DESTDIR=DIR); a scratch
#                   root gets no systemctl, userdel or groupdel calls, and its
#                   directories left empty are removed up to DIR itself
#   --prefix=DIR    the prefix given to install.sh (/usr/local)
#   --purge         also the configuration (/etc/autotuned, the peer token
#                   included), the cache (/var/lib/autotuned) and, on the real
#                   system, the service user and group
#   --user=NAME --group=NAME   as given to install.sh (autotuned)
#   --no-users --no-systemctl  as for install.sh
set -eu

root=${DESTDIR:-}
prefix=/usr/local
purge=no
user=autotuned
group=autotuned
users=yes
systemctl=yes

for arg in "$@"; do
  case $arg in
    --root=*) root=${arg#--root=} ;;
    --prefix=*) prefix=${arg#--prefix=} ;;
    --purge) purge=yes ;;
    --user=*) user=${arg#--user=} ;;
    --group=*) group=${arg#--group=} ;;
    --no-users) users=no ;;
    --no-systemctl) systemctl=no ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "uninstall: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done

root=${root%/}
if [ -n "$root" ]; then
  case $root in /*) ;; *) root=$(pwd)/$root ;; esac
  users=no
  systemctl=no
fi
unit=$root/etc/systemd/system/autotuned.service

if [ "$systemctl" = yes ] && [ -d /run/systemd/system ] && [ -e "$unit" ]; then
  systemctl disable --now autotuned.service || true
fi

rm -f "$root$prefix/bin/autotuned" "$root$prefix/bin/autotunectl" "$unit" \
  "$root/etc/systemd/system/autotuned.service.tmp"
rm -rf "$root$prefix/share/doc/autotuned" "$root$prefix/lib/autotuned"
if [ "$purge" = yes ]; then
  rm -rf "$root/etc/autotuned" "$root/var/lib/autotuned"
fi

if [ "$systemctl" = yes ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
fi
if [ "$purge" = yes ] && [ "$users" = yes ]; then
  if getent passwd "$user" >/dev/null; then userdel "$user"; echo "uninstall: removed user $user"; fi
  if getent group "$group" >/dev/null; then groupdel "$group"; echo "uninstall: removed group $group"; fi
fi

# In a scratch root, nothing is anyone else's: remove the directories the
# install created once they are empty, up to the root.
if [ -n "$root" ]; then
  for d in "$root$prefix/bin" "$root$prefix/lib" "$root$prefix/share/doc" "$root/etc/systemd/system" \
           "$root/etc/autotuned" "$root/var/lib"; do
    while [ "${d#"$root"/}" != "$d" ]; do
      if [ -d "$d" ]; then rmdir "$d" 2>/dev/null || break; fi
      d=$(dirname "$d")
    done
  done
fi
echo "uninstall: done (root ${root:-/}${purge:+, purge $purge})"
