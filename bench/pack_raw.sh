#!/usr/bin/env bash
# Packs the raw files of one results folder into FOLDER/raw.tar.gz, so that
# what a reader needs stays readable in the tree and the rest is one archive:
#
#   bash bench/pack_raw.sh bench/results/FOLDER
#
# Kept as they are: every *.md (the README, the reports), *.png, and any
# other file of at most 60 lines (steps.log, env.txt, short tables). Packed:
# every other file (JSON, JSON lines, logs, long tables), paths relative to
# FOLDER, in a reproducible archive (sorted, no owners, a fixed time), then
# removed. `tar xzf raw.tar.gz` in FOLDER puts them back where the README
# and the report scripts expect them. A folder that already has a
# raw.tar.gz is left alone.
set -eu
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: bash bench/pack_raw.sh FOLDER" >&2
  exit 2
fi
cd "$1"
if [ -e raw.tar.gz ]; then
  echo "pack_raw: $1 already has raw.tar.gz" >&2
  exit 0
fi
files=()
while IFS= read -r -d '' f; do
  [ "$(wc -l < "$f")" -gt 60 ] && files+=("${f#./}")
done < <(find . -type f ! -name '*.md' ! -name '*.png' -print0 | sort -z)
[ ${#files[@]} -eq 0 ] && exit 0
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2026-01-01 00:00Z' \
  -cf - "${files[@]}" | gzip -n -9 > raw.tar.gz
rm -f "${files[@]}"
find . -type d -empty -delete
echo "pack_raw: $1: ${#files[@]} files into raw.tar.gz"
