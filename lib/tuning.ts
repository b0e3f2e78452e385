/**
 * Process tuning: every knob of V8, the heap and the sockets that gw sets for speed or memory rather than
 * for a rule of the contract, each with what it is for. Where each is applied: the V8 flags by the image
 * (Dockerfile `ENV NODE_OPTIONS`, `ENTRYPOINT`), the chart (helm/gw/templates/_helpers.tpl
 * `gw.heapNodeOptions`) and the webhook for an injected sidecar (webhook/node-options.ts); the GC after
 * start-up by sidecar/heap-tuning.ts; the socket knobs by the file named beside each. Limits users set
 * (`headers_timeout`, `max_connections`, `kv_deadline_ms`…) are options (lib/options.ts), not tuning.
 * The figures behind these values: docs/benchmarks.md, "Memory under load".
 */

// ---- V8 and the heap

/**
 * V8 flags NODE_OPTIONS refuses, on node's command line in the image's ENTRYPOINT (and in `make bench`):
 * allocation-site pretenuring off, so per-request objects of undici and node:http die young instead of
 * being allocated straight into the old generation.
 */
export const ENTRYPOINT_NODE_FLAGS: readonly string[] = ['--no-allocation-site-pretenuring'];

/** Cap of each of the young generation's two semi-spaces, MiB: the part of the heap that grows with request concurrency. */
export const SIDECAR_SEMI_SPACE_MB = 8;

/**
 * V8's helper threads (background GC and compilation; node's default is 4). A sidecar has a fraction of a
 * core: four helpers at the event loop's priority take the cores from it while a burst of manifests is
 * parsed; with one, background marking falls behind under client rotation and the heap peaks over its
 * bound. Two keep both.
 */
export const V8_POOL_SIZE = 2;

/**
 * The old space's share of the container memory limit: what is left holds code, the young generation and
 * native buffers, so V8 collects harder as it nears the limit instead of the kernel killing the container.
 */
export const OLD_SPACE_SHARE = 0.6;

/**
 * The image's default NODE_OPTIONS (Dockerfile `ENV NODE_OPTIONS`, which must say the same): the heap
 * flags without a memory limit, and `--expose-gc` for the one GC after start-up (sidecar/heap-tuning.ts).
 */
export const IMAGE_NODE_OPTIONS = `--expose-gc --max-semi-space-size=${SIDECAR_SEMI_SPACE_MB} --v8-pool-size=${V8_POOL_SIZE}`;

/**
 * Heap in use above which the GC after start-up is one regular full GC instead of the last-resort one:
 * that flavour repeats the full GC until a pass frees nothing (at least two marks of the whole heap), which
 * for a heap of ~150 MB (gw standalone with 100,000 keys) would hold its ready line for more than a second,
 * for almost no more memory back than one pass gives.
 */
export const STARTUP_GC_LARGE_HEAP_BYTES = 64 * 1024 * 1024;

// ---- sockets

/**
 * The gateway listener's idle keep-alive (sidecar/proxy/gateway-server.ts): node's default, kept explicit
 * because the drain on shutdown closes idle connections itself (lib/serve.ts), so this bounds only how
 * long an idle client holds a socket.
 */
export const GATEWAY_KEEP_ALIVE_MS = 5_000;

/**
 * Requests an HTTP/1.1 client may pipeline behind the one the gateway is answering on its connection
 * (lib/http/pipelined.ts): they wait their turn, as nginx serves them; past this many waiting, the
 * connection is closed. Browsers and HTTP libraries pipeline a handful at most, when at all.
 */
export const PIPELINED_MAX = 32;

/**
 * The idle keep-alive of every other listener (the facade, the webhook, standalone's admin listener, the
 * metrics listeners; lib/serve.ts): longer than the idle pool of the clients that ignore the server's
 * `Keep-Alive: timeout=N` hint, so such a client closes an idle connection before the server does and
 * never writes a request onto one the server is closing. The one that matters is Go's net/http (90 s
 * idle, no hint read): the kube-apiserver calling the webhook (a POST it does not retry: an admission
 * refused with `EOF` under `failurePolicy: Fail`), Prometheus scraping /metrics, Go tools calling the
 * facade. node:http announces `timeout=100` and closes 1 s after it; undici reads the hint and lets a
 * connection go 2 s before it, node's http.Agent (with a `timeout`) 1 s before. Not a round minute, so
 * that a client reusing its connection every 60 or 120 s (a scrape interval) is never at the close.
 */
export const ADMIN_KEEP_ALIVE_MS = 100_000;

/**
 * The HPACK dynamic table of the gateway's HTTP/2 response headers (sidecar/proxy/protocols.ts, node's
 * `maxDeflateDynamicTableSize`): none, so every response header is sent as a literal (names from the static
 * table where it has them), as nginx's HTTP/2 module sends them. X-RateLimit-Remaining changes on every
 * response: with node's 4 KiB table each response inserted it and, as the table turned over, the upstream's
 * headers again, at the cost of nghttp2's allocations per entry; without it the h2c pair of `make bench`
 * reads ~5% more per CPU-second (docs/benchmarks.md, "What the h2c pair compares"), for ~105 bytes more per
 * response head (127 against 22 under the bench's load). What clients send is decoded with the table they
 * choose, as before.
 */
export const H2_RESPONSE_HEADER_TABLE_BYTES = 0;

/**
 * Idle keep-alive of the upstream pools (sidecar/proxy/upstream.ts): longer than the gateway's own, so a
 * pool keeps its connections between bursts (a new upstream connection costs more than a request).
 * One request per connection at a time (no pipelining: a slow response would hold the ones behind it).
 */
export const UPSTREAM_POOL = { keepAliveTimeout: 30_000, pipelining: 1 } as const;

/** The facade's client of the gateway (facade/server.ts, `gw proxy`): bounded, idle connections kept 10 s. */
export const FACADE_AGENT = { keepAliveTimeout: 10_000, connections: 64 } as const;

/** A stream's HTTP output or processor (streams/http-call.ts): idle connections kept 10 s. */
export const STREAM_HTTP_KEEP_ALIVE_MS = 10_000;

/**
 * The API server's connections (lib/kube/connection.ts): idle ones kept 30 s (a watch's reconnect and a
 * controller's next write find one open).
 */
export const KUBE_KEEP_ALIVE_MS = 30_000;
