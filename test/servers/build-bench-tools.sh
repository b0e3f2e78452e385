#!/usr/bin/env bash
# Builds the load generator of `make bench`'s fixed-rate latency: vegeta, compiled from the Go module
# proxy with the local Go toolchain (wrk2 is not in Debian). vegeta sends at a constant rate (open loop)
# and reports latency percentiles from Go, so the client's own pauses are sub-millisecond; the Node.js
# client it replaced paused for its own GC and put several milliseconds into every p99 it measured.
# Output: ${GW_TEST_CACHE:-$HOME/.cache/gw-test}/bin/vegeta with a version stamp (idempotent).
set -euo pipefail

VEGETA_VERSION=v12.12.0   # github.com/tsenart/vegeta/v12

CACHE="${GW_TEST_CACHE:-$HOME/.cache/gw-test}"
BIN="$CACHE/bin"
DIR="$CACHE/src/vegeta-$VEGETA_VERSION"
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off

if [[ ! -x "$BIN/vegeta" || "$(cat "$BIN/.vegeta.version" 2>/dev/null)" != "$VEGETA_VERSION" ]]; then
  mkdir -p "$BIN" "$DIR"
  printf 'module gwtest/vegeta\n\ngo 1.26\n\nrequire github.com/tsenart/vegeta/v12 %s\n' "$VEGETA_VERSION" >"$DIR/go.mod"
  (cd "$DIR" && go build -trimpath -ldflags "-s -w -X main.Version=$VEGETA_VERSION" -o "$BIN/vegeta" github.com/tsenart/vegeta/v12)
  echo "$VEGETA_VERSION" >"$BIN/.vegeta.version"
fi
echo "vegeta:      $("$BIN/vegeta" -version 2>&1 | head -1)  ($BIN/vegeta)"
