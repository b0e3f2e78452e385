#!/usr/bin/env bash
# `make run`: the demo upstream on 127.0.0.1:9090 and gw standalone on the example resources.
# Facade writes go to a scratch copy (.gw-run/), so the repository's examples stay clean.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gw-run && mkdir -p .gw-run && cp -r examples .gw-run/resources
node dist/scripts/echo-upstream.js 9090 &
ECHO=$!
trap 'kill $ECHO 2>/dev/null || true' EXIT
node dist/cli/gw.js standalone --resources .gw-run/resources "$@"
