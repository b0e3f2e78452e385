#!/usr/bin/env bash
# Installs missing Debian packages for the tests and the benchmark: each argument is COMMAND:PACKAGE,
# and PACKAGE is installed when COMMAND is not on PATH. Works as root or with passwordless sudo; runs
# `apt-get update` only when the first install fails (package lists never fetched, or stale).
set -euo pipefail
missing=()
for pair in "$@"; do
  cmd=${pair%%:*} pkg=${pair#*:}
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  echo "gw: missing ${missing[*]} and cannot install (not root, no passwordless sudo): apt-get install ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
echo "gw: installing ${missing[*]} (Debian packages)" >&2
if ! "${SUDO[@]}" apt-get install -y -q "${missing[@]}" >/dev/null 2>&1; then
  "${SUDO[@]}" apt-get update -q >/dev/null
  "${SUDO[@]}" apt-get install -y -q "${missing[@]}" >/dev/null
fi
for pair in "$@"; do
  cmd=${pair%%:*}
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || { echo "gw: $cmd still missing after installing" >&2; exit 1; }
done
