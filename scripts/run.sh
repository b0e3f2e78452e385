#!/usr/bin/env bash
# `make run`: the demo upstream and gw standalone on the example resources.
# Ports: GW_DEMO_UPSTREAM_PORT (default 9090) for the echo upstream (the examples' target_url is
# rewritten when it differs); the gateway and management addresses are gw's own GW_LISTEN and
# GW_ADMIN_LISTEN (defaults 0.0.0.0:8080 and 127.0.0.1:8081). Extra arguments go to `gw standalone`.
# Facade writes go to a scratch copy (GW_RUN_DIR, default .gw-run/), so the repository's examples stay clean.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_DIR=${GW_RUN_DIR:-.gw-run}
PORT=${GW_DEMO_UPSTREAM_PORT:-9090}
rm -rf "$RUN_DIR" && mkdir -p "$RUN_DIR" && cp -r examples "$RUN_DIR/resources"
if [ "$PORT" != 9090 ]; then
  sed -i "s#127\.0\.0\.1:9090#127.0.0.1:$PORT#g" "$RUN_DIR"/resources/*.yaml
fi

# The demo upstream must really be ours: wait for its "listening" line, fail if it could not bind.
node dist/scripts/echo-upstream.js "$PORT" >"$RUN_DIR/echo.log" 2>&1 &
ECHO=$!
trap 'kill $ECHO 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  grep -q listening "$RUN_DIR/echo.log" && break
  if ! kill -0 "$ECHO" 2>/dev/null; then
    cat "$RUN_DIR/echo.log" >&2
    echo "make run: the demo upstream could not listen on 127.0.0.1:$PORT (in use? set GW_DEMO_UPSTREAM_PORT)" >&2
    exit 1
  fi
  sleep 0.1
done
cat "$RUN_DIR/echo.log"
node dist/cli/gw.js standalone --resources "$RUN_DIR/resources" "$@"
