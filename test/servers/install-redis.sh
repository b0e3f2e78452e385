#!/usr/bin/env bash
# Installs Debian's redis-server when it is missing (the integration tests start their own instance).
# Works as root or with passwordless sudo; runs `apt-get update` only when the first install fails
# (a fresh machine whose package lists were never fetched, or stale lists).
set -euo pipefail
command -v redis-server >/dev/null 2>&1 && exit 0
if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  echo "gw: redis-server is missing and cannot be installed (not root, no passwordless sudo): apt-get install redis-server" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
echo "gw: installing redis-server (Debian package)" >&2
if ! "${SUDO[@]}" apt-get install -y -q redis-server >/dev/null 2>&1; then
  "${SUDO[@]}" apt-get update -q >/dev/null
  "${SUDO[@]}" apt-get install -y -q redis-server >/dev/null
fi
command -v redis-server >/dev/null 2>&1 || { echo "gw: redis-server still not on PATH after installing" >&2; exit 1; }
