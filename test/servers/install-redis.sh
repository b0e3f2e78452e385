#!/usr/bin/env bash
# Installs Debian's redis-server when it is missing (the integration tests start their own instance).
exec bash "$(dirname "$0")/install-debian.sh" redis-server:redis-server
