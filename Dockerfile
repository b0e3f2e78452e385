# gw: one image for every subcommand (`gw controller|facade|webhook|sidecar|standalone`), see docs/helm.md.
# Multi-stage: compile TypeScript with the dev dependencies, install only the production dependencies
# separately, and ship those two on a slim Node 24 base as a non-root user. Nothing is written at run
# time, so the container runs with a read-only root filesystem.
# `npm install` from the lockfile, not `npm ci`: the lockfile lacks the optional platform bindings of a
# dev dependency (npm/cli#4828), which `npm ci` refuses — the Makefile's deps target does the same.
# Versions still come from package-lock.json (the build-context test checks it).
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm install --no-save --no-audit --no-fund
COPY tsconfig.json ./
COPY cli ./cli
COPY lib ./lib
COPY crds ./crds
COPY contract ./contract
COPY stores ./stores
COPY compiler ./compiler
COPY limiters ./limiters
COPY controller ./controller
COPY facade ./facade
COPY webhook ./webhook
COPY standalone ./standalone
COPY sidecar ./sidecar
COPY streams ./streams
# The git commit `gw version`, /healthz and gw_build_info name (lib/build-info.ts): .git is not in the
# context, so it is passed in (`docker build --build-arg GW_COMMIT=$(git rev-parse HEAD) .`); without it
# they say unknown.
ARG GW_COMMIT=""
# the Lua scripts the limiters read at start, beside their compiled modules (as the Makefile's build does)
RUN npx tsc -p tsconfig.json \
 && find cli lib contract compiler limiters stores controller facade webhook standalone sidecar streams -name '*.lua' -exec install -D -m 644 {} dist/{} \; \
 && rm -rf dist/test dist/scripts \
 && if [ -n "$GW_COMMIT" ]; then printf '{"commit":"%s"}\n' "$GW_COMMIT" > dist/build-info.json; fi

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-save --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM ${NODE_IMAGE}
LABEL org.opencontainers.image.title="gw" \
      org.opencontainers.image.description="Kubernetes-native API gateway that rate-limits traffic" \
      org.opencontainers.image.licenses="Apache-2.0"
# MALLOC_ARENA_MAX: two glibc malloc arenas instead of one per thread, a smaller idle RSS (docs/benchmarks.md).
# NODE_OPTIONS: V8's young generation capped (RSS under load), the GC after start-up (sidecar/heap-tuning.ts) and
# two V8 helper threads (lib/tuning.ts IMAGE_NODE_OPTIONS: every process-tuning knob and why);
# the chart replaces it per container with the old-space limit of that container's memory limit (docs/helm.md).
ENV NODE_ENV=production MALLOC_ARENA_MAX=2 NODE_OPTIONS="--expose-gc --max-semi-space-size=8 --v8-pool-size=2"
RUN groupadd --gid 10001 gw && useradd --uid 10001 --gid gw --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin gw
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
USER 10001:10001
# gateway/sidecar 8080, facade 8081, webhook 8443, metrics 9090/9091
EXPOSE 8080 8081 8443 9090 9091
# --no-allocation-site-pretenuring: a V8 flag NODE_OPTIONS refuses (lib/tuning.ts ENTRYPOINT_NODE_FLAGS)
ENTRYPOINT ["node", "--no-allocation-site-pretenuring", "/app/dist/cli/gw.js"]
CMD ["--help"]
