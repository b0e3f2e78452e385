/**
 * `make bench`'s HTTP/2, gRPC and TLS rows (docs/benchmarks.md, "HTTP/2, gRPC and TLS"), every one a ratio
 * against a baseline measured in the same run, with the set-up of run.ts: proxies pinned to
 * GW_BENCH_PROXY_CPU (0), load generators and upstreams to GW_BENCH_LOAD_CPU (1), nginx (a 29-byte JSON
 * body) as the HTTP/1.1 upstream, the bench API and key of gw-bench-setup.ts (key auth, a DRL key limit
 * that never refuses), gw as `gw standalone` with the image's node flags.
 *   h2c: `gw` (h2c on its plain listener) against a bare node:http2 proxy (bare-protocols.ts h2c), both
 *     forwarding to nginx over HTTP/1.1; simultaneous pairs under h2load (-c H2_CONNS -m H2_STREAMS). The
 *     bare proxy runs with gw's V8 flags (the target's pair), and a second one with V8's defaults (reported).
 *     With GW_BENCH_COMPARE (another build's dist/cli/gw.js, as run.ts takes it): also this gw × that
 *     build's, both with the same API, key and flags (what a change costs HTTP/2 against that build), this
 *     build's side a process of its own that only that pair loads, as the compared one.
 *   TLS handshake: new connections per second, every request on a new TLS connection (wrk with
 *     `Connection: close`), gw's TLS listener against a bare node:https proxy (bare-protocols.ts tls);
 *     simultaneous pairs. ECDSA P-256 certificate; the bare proxy counts resumed sessions (0: every one a
 *     full handshake).
 *   gRPC unary: h2load posting one framed message to /bench.Echo/Unary of a grpc-js server
 *     (grpc-upstream.ts, h2c), directly and through gw (an h2c:// target); interleaved sequential rounds
 *     (the upstream is the same process, so the two cannot be loaded at once): calls/s, gw's CPU µs per
 *     call, and the mean time of a call with one in flight (added = gw − direct).
 *   gRPC unary, gw × bare: the same calls through gw and through a bare node:http2 gRPC proxy
 *     (bare-protocols.ts grpc) to the same upstream; simultaneous pairs: what gw costs over the least a
 *     node:http2 proxy of gRPC does (direct calls cross no proxy at all).
 * Every process started is stopped at the end or on failure. Needs h2load (Debian nghttp2-client), wrk,
 * nginx, taskset. Prints Markdown and writes dist/bench-protocols-last.json.
 */
import { execFile, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect as h2connect } from 'node:http2';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../harness/ports.js';
import { issue, makeCa } from '../helpers/certs.js';
import { apiManifest } from '../helpers/standalone.js';
import { BENCH_KEY, GW_BENCH_ENV, GW_NODE_FLAGS, baselineNode, gwStandaloneBench } from './gw-bench-setup.js';
import { benchRun, children, pinned, portOpen, tmp, waitFor } from './children.js';
import { cpuSeconds, family, pinTo, stopChild } from './proc.js';

const run = promisify(execFile);
const SECONDS = Number(process.env.GW_BENCH_SECONDS ?? 5);
const WARM_S = Number(process.env.GW_BENCH_WARM_S ?? 3);
const CONNS = Number(process.env.GW_BENCH_CONNECTIONS ?? 50);
const ROUNDS = Number(process.env.GW_BENCH_SIM_ROUNDS ?? 5);
const PROXY_CPU = process.env.GW_BENCH_PROXY_CPU ?? '0';
const LOAD_CPU = process.env.GW_BENCH_LOAD_CPU ?? '1';
/** h2load: connections and concurrent streams per connection (500 requests in flight, as 50 × 10) */
const H2_CONNS = 50;
const H2_STREAMS = 10;
/** ~(3 + 5) s per measurement × (4 pairs, 5 with GW_BENCH_COMPARE, + 2 gRPC runs + 2 one-in-flight runs) × 5 rounds, start-up */
const DEADLINE_S = Number(process.env.GW_BENCH_DEADLINE_S ?? 900);
/** GW_BENCH_PROTOCOLS=h2c,tls,grpc: only these rows */
const ROWS = process.env.GW_BENCH_PROTOCOLS?.split(',').map((c) => c.trim());
const wanted = (k: string): boolean => !ROWS || ROWS.includes(k);
/** another build's CLI for the h2c row's build pair */
const COMPARE = process.env.GW_BENCH_COMPARE;
const started = Date.now();

benchRun('gw bench protocols', DEADLINE_S);

interface Load {
  rps: number;
  /** requests answered 2xx */
  ok: number;
  /** non-2xx, failed, errored, timed out */
  errors: number;
  /** h2load's mean time per request, ms */
  meanMs: number;
}

const msOf = (v: string, unit: string): number =>
  unit === 'us' ? Number(v) / 1000 : unit === 's' ? Number(v) * 1000 : Number(v);

/** h2load on the load CPU for `seconds`. */
async function h2load(
  url: string,
  seconds: number,
  o: { c: number; m: number; headers: string[]; data?: string },
): Promise<Load> {
  const args = ['-c', LOAD_CPU, 'h2load', '-t1', `-c${o.c}`, `-m${o.m}`, `-D${seconds}`];
  for (const h of o.headers) args.push('-H', h);
  if (o.data) args.push('-d', o.data);
  args.push(url);
  const { stdout } = await run('taskset', args, { timeout: (seconds + 20) * 1000 });
  const req =
    /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(
      stdout,
    );
  // status codes count every answer (the ramp-up's too), requests only the measured period
  const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(stdout);
  const mean = /time for request:\s+\S+?(us|ms|s)\s+\S+?(?:us|ms|s)\s+([\d.]+)(us|ms|s)/.exec(stdout);
  const done = Number(req?.[2] ?? NaN);
  const bad = codes ? Number(codes[2]) + Number(codes[3]) + Number(codes[4]) : NaN;
  return {
    rps: Number(/finished in [\d.]+s, ([\d.]+) req\/s/.exec(stdout)?.[1] ?? NaN),
    ok: done - bad,
    errors: req ? bad + Number(req[4]) + Number(req[5]) + Number(req[6]) : NaN,
    meanMs: mean ? msOf(mean[2]!, mean[3]!) : NaN,
  };
}

/** wrk with every request on a new connection (`Connection: close`): new TLS connections per second. */
async function wrkNewConnections(url: string, seconds: number, auth?: string): Promise<Load> {
  const args = [
    '-c',
    LOAD_CPU,
    'wrk',
    '-t1',
    `-c${CONNS}`,
    `-d${seconds}s`,
    '--timeout',
    '5s',
    '-H',
    'connection: close',
  ];
  if (auth) args.push('-H', `authorization: ${auth}`);
  args.push(url);
  const { stdout } = await run('taskset', args, { timeout: (seconds + 20) * 1000 });
  const requests = Number(/(\d+) requests in/.exec(stdout)?.[1] ?? NaN);
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0);
  // wrk counts a connection the server closes after its answer as a read error on some versions: those
  // are not failures here; connect errors and timeouts are
  const errors = [...stdout.matchAll(/(connect|timeout) (\d+)/g)].reduce((s, m) => s + Number(m[2]), 0);
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? NaN),
    ok: requests - non2xx,
    errors: non2xx + errors,
    meanMs: NaN,
  };
}

interface Proxy {
  name: string;
  pid: number;
}

interface PairRound {
  rps: number;
  perCpu: number;
  errors: number;
  a: number;
  b: number;
}

/** Both loads at the same moment (the one that starts first alternates): req/s and requests per CPU-second ratios. */
async function pair(
  a: Proxy,
  b: Proxy,
  load: (which: 'a' | 'b', seconds: number) => Promise<Load>,
  bFirst: boolean,
): Promise<PairRound> {
  const both = async (seconds: number): Promise<[Load, Load]> => {
    if (bFirst) {
      const [y, x] = await Promise.all([load('b', seconds), load('a', seconds)]);
      return [x, y];
    }
    return Promise.all([load('a', seconds), load('b', seconds)]);
  };
  await both(WARM_S);
  const ca = cpuSeconds(a.pid);
  const cb = cpuSeconds(b.pid);
  const [la, lb] = await both(SECONDS);
  const perCpu = la.ok / (cpuSeconds(a.pid) - ca) / (lb.ok / (cpuSeconds(b.pid) - cb));
  return { rps: la.rps / lb.rps, perCpu, errors: la.errors + lb.errors, a: la.rps, b: lb.rps };
}

function spread(xs: number[]): { median: number; min: number; max: number } {
  const r = [...xs].sort((x, y) => x - y);
  const mid = r.length >> 1;
  return { median: r.length % 2 ? r[mid]! : (r[mid - 1]! + r[mid]!) / 2, min: r[0]!, max: r[r.length - 1]! };
}
const fmt = (n: number, d = 0): string => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');
const spreadText = (xs: number[], d = 2): string => {
  const x = spread(xs);
  return `${fmt(x.median, d)} (${fmt(x.min, d)}–${fmt(x.max, d)})`;
};

/** One gRPC unary call over h2c to `origin`: its grpc-status trailer (a sanity check before the load). */
function grpcStatus(origin: string, body: Buffer, auth?: string): Promise<string> {
  return new Promise((res, rej) => {
    const s = h2connect(origin);
    s.on('error', rej);
    const r = s.request({
      ':method': 'POST',
      ':path': '/bench.Echo/Unary',
      'content-type': 'application/grpc',
      te: 'trailers',
      ...(auth ? { authorization: auth } : {}),
    });
    let status = 'none';
    r.on('response', (h) => (status = String(h['grpc-status'] ?? status)));
    r.on('trailers', (t) => (status = String(t['grpc-status'] ?? status)));
    r.on('data', () => undefined);
    r.on('end', () => (s.close(), res(status)));
    r.on('error', rej);
    r.end(body);
  });
}

async function startGw(
  name: string,
  upstream: string,
  grpcUpstream: string,
  config?: string,
  cli?: string,
): Promise<Proxy & { origin: string }> {
  const dir = tmp('gw-bench-proto-res-');
  const args = await gwStandaloneBench(dir, upstream);
  if (cli !== undefined) args[0] = resolve(cli);
  // the gRPC API beside the bench API: the same key (no access_rights: every API)
  writeFileSync(
    join(dir, 'grpc.yaml'),
    apiManifest('bench-grpc', `proxy: {listen_path: /bench.Echo/, target_url: 'h2c://${grpcUpstream}'}`),
  );
  // h2load's H2_CONNS connections all come from 127.0.0.1: above the per-address session cap's default
  const f = join(tmp('gw-bench-proto-cfg-'), 'config.yaml');
  writeFileSync(f, `http2: {max_sessions_per_client: ${2 * H2_CONNS}}\n${config ?? ''}`);
  args.push('--config', f);
  const c = pinned(PROXY_CPU, process.execPath, [...GW_NODE_FLAGS, ...args], GW_BENCH_ENV);
  await waitFor(name, () => c.out().includes('gw standalone ready:'), 20_000, c.out);
  const origin = /gateway (https?:\/\/[^\s]+)/.exec(c.out())![1]!;
  return { name, pid: c.pid!, origin };
}

async function main(): Promise<void> {
  for (const tool of ['h2load', 'wrk', 'nginx', 'taskset'])
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0)
      throw new Error(`gw bench protocols needs ${tool} (make bench installs it: test/servers/install-debian.sh)`);
  const dir = tmp('gw-bench-proto-');
  console.log(
    `gw bench protocols: proxies on CPU ${PROXY_CPU}; load and upstreams on CPU ${LOAD_CPU}; ${ROUNDS} rounds of ${WARM_S} s warm-up + ${SECONDS} s; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
  );
  const upPort = await freePort();
  writeFileSync(
    join(dir, 'upstream.conf'),
    `worker_processes 1; daemon off; user root root; pid ${dir}/up.pid; error_log ${dir}/up-error.log warn;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000;
  client_body_temp_path ${dir}/b; proxy_temp_path ${dir}/p; fastcgi_temp_path ${dir}/f; uwsgi_temp_path ${dir}/u; scgi_temp_path ${dir}/s;
  server { listen 127.0.0.1:${upPort} reuseport backlog=4096; location / { default_type application/json; return 200 '{"ok":true,"service":"bench"}'; } } }
`,
  );
  const up = pinned(LOAD_CPU, 'nginx', ['-p', dir, '-c', join(dir, 'upstream.conf')]);
  await waitFor('upstream nginx', () => portOpen(upPort), 20_000, up.out);
  const upstream = `http://127.0.0.1:${upPort}`;
  const grpcPort = await freePort();
  const grpcUp = pinned(LOAD_CPU, process.execPath, [resolve('dist/test/bench/grpc-upstream.js'), String(grpcPort)]);
  await waitFor('grpc upstream', () => grpcUp.out().includes('ready'), 20_000, grpcUp.out);

  makeCa(dir, 'ca');
  const cert = issue(dir, 'ca', 'gw', 'localhost');
  const grpcDirect = `http://127.0.0.1:${grpcPort}`;
  /** A bare proxy (bare-protocols.ts `mode`) on the proxy CPU, up: its port and process. */
  const bareProxy = async (
    mode: string,
    what: string,
    rest: string[],
    heap?: 'sidecar',
  ): Promise<[number, ChildProcess & { out: () => string }]> => {
    const port = await freePort();
    const script = [resolve('dist/test/bench/bare-protocols.js'), mode, String(port), ...rest];
    // 'sidecar': the V8 flags of the measured gw (NODE_OPTIONS and node's own), else V8's defaults
    const { args, env } = baselineNode(script, heap ?? 'defaults');
    const c = pinned(PROXY_CPU, process.execPath, args, env);
    await waitFor(what, () => c.out().includes('ready'), 20_000, c.out);
    return [port, c];
  };
  // the h2c baseline runs with gw's heap flags (docs/benchmarks.md, "HTTP/2, gRPC and TLS"): at 500 streams
  // in flight the young generation's size decides the cost per request, so the pair compares the two
  // proxies' work within the same heap; the same bare proxy at V8's defaults is reported beside it
  const [bareH2Port, bareH2] = await bareProxy('h2c', 'bare h2c proxy', [upstream], 'sidecar');
  const [bareH2DefaultPort, bareH2Default] = await bareProxy('h2c', 'bare h2c proxy, V8 defaults', [upstream]);
  const [bareTlsPort, bareTls] = await bareProxy('tls', 'bare TLS proxy', [upstream, cert.cert, cert.key]);
  const [bareGrpcPort, bareGrpc] = await bareProxy('grpc', 'bare gRPC proxy', [grpcDirect]);
  const gw = await startGw('gw h2c', upstream, `127.0.0.1:${grpcPort}`);
  const gwTls = await startGw(
    'gw TLS',
    upstream,
    `127.0.0.1:${grpcPort}`,
    `tls: {cert_file: ${cert.cert}, key_file: ${cert.key}}\n`,
  );
  const compared =
    COMPARE !== undefined && wanted('h2c')
      ? await startGw('compared gw h2c', upstream, `127.0.0.1:${grpcPort}`, undefined, COMPARE)
      : undefined;
  // the build pair's own instance of this build: with the same history as the compared one (loaded only in
  // that pair); the gw of the other pairs, loaded three times as often, read ~6% under an identical copy of
  // itself
  const own = compared ? await startGw('gw h2c, the build pair', upstream, `127.0.0.1:${grpcPort}`) : undefined;
  const bareGrpcProxy: Proxy = { name: 'bare gRPC', pid: bareGrpc.pid! };
  const proxies: Proxy[] = [
    gw,
    gwTls,
    { name: 'bare h2c', pid: bareH2.pid! },
    { name: 'bare TLS', pid: bareTls.pid! },
    bareGrpcProxy,
    { name: 'bare h2c, V8 defaults', pid: bareH2Default.pid! },
    ...(compared && own ? [compared, own] : []),
  ];
  const onProxyCpu = (...measured: Proxy[]): void => {
    const keep = new Set(measured.map((p) => p.pid));
    for (const p of proxies) pinTo(keep.has(p.pid) ? PROXY_CPU : LOAD_CPU, family(p.pid));
  };

  // the gRPC request body: one length-prefixed message (uncompressed, 16 bytes)
  const msg = Buffer.from('bench-grpc-unary');
  const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, msg.length]), msg]);
  const dataFile = join(dir, 'unary.bin');
  writeFileSync(dataFile, frame);
  for (const [what, origin, auth] of [
    ['direct', grpcDirect, undefined],
    ['through gw', gw.origin, BENCH_KEY],
    ['through the bare gRPC proxy', `http://127.0.0.1:${bareGrpcPort}`, undefined],
  ] as const) {
    const st = await grpcStatus(origin, frame, auth);
    if (st !== '0') throw new Error(`gw bench protocols: a gRPC call ${what} ended with grpc-status ${st}`);
  }
  const grpcHeaders = ['content-type: application/grpc', 'te: trailers'];
  const keyHeader = `authorization: ${BENCH_KEY}`;

  const h2c: PairRound[] = [];
  const h2cDefaults: PairRound[] = [];
  const h2cCompare: PairRound[] = [];
  const tlsRounds: PairRound[] = [];
  const grpcPairs: PairRound[] = [];
  const grpcRounds: { direct: Load; gw: Load; gwCpuUs: number; directOne: Load; gwOne: Load }[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    console.log(`round ${r + 1}/${ROUNDS}`);
    const swap = r % 2 === 1;
    if (wanted('h2c')) {
      onProxyCpu(gw, proxies[2]!);
      const x = await pair(
        gw,
        proxies[2]!,
        (w, s) =>
          h2load(w === 'a' ? `${gw.origin}/api/x` : `http://127.0.0.1:${bareH2Port}/x`, s, {
            c: H2_CONNS,
            m: H2_STREAMS,
            headers: w === 'a' ? [keyHeader] : [],
          }),
        swap,
      );
      h2c.push(x);
      console.log(
        `  h2c gw × bare node:http2: req/s ${x.rps.toFixed(3)} (${fmt(x.a)} / ${fmt(x.b)}), per CPU-second ${x.perCpu.toFixed(3)}, errors ${x.errors}`,
      );
      onProxyCpu(gw, proxies[5]!);
      const y = await pair(
        gw,
        proxies[5]!,
        (w, s) =>
          h2load(w === 'a' ? `${gw.origin}/api/x` : `http://127.0.0.1:${bareH2DefaultPort}/x`, s, {
            c: H2_CONNS,
            m: H2_STREAMS,
            headers: w === 'a' ? [keyHeader] : [],
          }),
        swap,
      );
      h2cDefaults.push(y);
      console.log(
        `  h2c gw × bare node:http2 at V8 defaults: req/s ${y.rps.toFixed(3)} (${fmt(y.a)} / ${fmt(y.b)}), per CPU-second ${y.perCpu.toFixed(3)}, errors ${y.errors}`,
      );
      if (compared && own) {
        onProxyCpu(own, compared);
        const z = await pair(
          own,
          compared,
          (w, s) =>
            h2load(`${w === 'a' ? own.origin : compared.origin}/api/x`, s, {
              c: H2_CONNS,
              m: H2_STREAMS,
              headers: [keyHeader],
            }),
          swap,
        );
        h2cCompare.push(z);
        console.log(
          `  h2c gw × the compared build: req/s ${z.rps.toFixed(3)} (${fmt(z.a)} / ${fmt(z.b)}), per CPU-second ${z.perCpu.toFixed(3)}, errors ${z.errors}`,
        );
      }
    }
    if (wanted('tls')) {
      onProxyCpu(gwTls, proxies[3]!);
      const x = await pair(
        gwTls,
        proxies[3]!,
        (w, s) =>
          w === 'a'
            ? wrkNewConnections(`${gwTls.origin}/api/x`, s, BENCH_KEY)
            : wrkNewConnections(`https://127.0.0.1:${bareTlsPort}/x`, s),
        swap,
      );
      tlsRounds.push(x);
      console.log(
        `  TLS new connections gw × bare node:https: ${x.rps.toFixed(3)} (${fmt(x.a)} / ${fmt(x.b)} per s), per CPU-second ${x.perCpu.toFixed(3)}, errors ${x.errors}`,
      );
    }
    if (wanted('grpc')) {
      // gw against the bare node:http2 gRPC proxy, at the same moment, to the same upstream
      onProxyCpu(gw, bareGrpcProxy);
      const x = await pair(
        gw,
        bareGrpcProxy,
        (w, s) =>
          h2load(w === 'a' ? `${gw.origin}/bench.Echo/Unary` : `http://127.0.0.1:${bareGrpcPort}/bench.Echo/Unary`, s, {
            c: H2_CONNS,
            m: H2_STREAMS,
            headers: w === 'a' ? [...grpcHeaders, keyHeader] : grpcHeaders,
            data: dataFile,
          }),
        swap,
      );
      grpcPairs.push(x);
      console.log(
        `  gRPC unary gw × bare node:http2 gRPC proxy: calls/s ${x.rps.toFixed(3)} (${fmt(x.a)} / ${fmt(x.b)}), per CPU-second ${x.perCpu.toFixed(3)}, errors ${x.errors}`,
      );
      onProxyCpu(gw);
      const direct = (s: number, c: number, m: number): Promise<Load> =>
        h2load(`${grpcDirect}/bench.Echo/Unary`, s, { c, m, headers: grpcHeaders, data: dataFile });
      const through = (s: number, c: number, m: number): Promise<Load> =>
        h2load(`${gw.origin}/bench.Echo/Unary`, s, { c, m, headers: [...grpcHeaders, keyHeader], data: dataFile });
      const measureGw = async (): Promise<[Load, number]> => {
        await through(WARM_S, H2_CONNS, H2_STREAMS);
        const c0 = cpuSeconds(gw.pid);
        const l = await through(SECONDS, H2_CONNS, H2_STREAMS);
        return [l, ((cpuSeconds(gw.pid) - c0) * 1e6) / l.ok];
      };
      const measureDirect = async (): Promise<Load> => {
        await direct(WARM_S, H2_CONNS, H2_STREAMS);
        return direct(SECONDS, H2_CONNS, H2_STREAMS);
      };
      let d: Load;
      let g: [Load, number];
      if (swap) {
        g = await measureGw();
        d = await measureDirect();
      } else {
        d = await measureDirect();
        g = await measureGw();
      }
      // one call in flight: the time a call takes, direct and through gw (closed loop, 3 s each)
      const directOne = await direct(3, 1, 1);
      const gwOne = await through(3, 1, 1);
      grpcRounds.push({ direct: d, gw: g[0], gwCpuUs: g[1], directOne, gwOne });
      console.log(
        `  gRPC unary: direct ${fmt(d.rps)}/s, through gw ${fmt(g[0].rps)}/s (${fmt(g[1], 1)} CPU µs per call), one in flight ${fmt(directOne.meanMs, 3)} / ${fmt(gwOne.meanMs, 3)} ms, errors ${d.errors + g[0].errors + directOne.errors + gwOne.errors}`,
      );
    }
  }
  await Promise.all(children.map((c) => stopChild(c, 5000)));
  const resumed = /tls handshakes (\d+), resumed (\d+)/.exec(bareTls.out());

  const lines: string[] = [''];
  const p = (s: string): void => void lines.push(s);
  p(`## HTTP/2, gRPC and TLS (proxies on CPU ${PROXY_CPU}, load on CPU ${LOAD_CPU}; ${ROUNDS} rounds)`);
  p('| figure | median (range) | absolute (medians) | target | errors |');
  p('|---|---|---|---|---|');
  if (h2c.length) {
    const ok = Math.min(spread(h2c.map((x) => x.rps)).median, spread(h2c.map((x) => x.perCpu)).median) >= 0.9;
    p(
      `| h2c, gw key auth + DRL × bare node:http2, both with the sidecar's heap flags (simultaneous; h2load -c${H2_CONNS} -m${H2_STREAMS}): req/s; per CPU-second | ${spreadText(h2c.map((x) => x.rps))}; ${spreadText(h2c.map((x) => x.perCpu))} | ${fmt(spread(h2c.map((x) => x.a)).median)} / ${fmt(spread(h2c.map((x) => x.b)).median)} req/s | ≥ 0.9: ${ok ? 'met' : 'MISSED'} | ${h2c.reduce((s, x) => s + x.errors, 0)} |`,
    );
    p(
      `| h2c, the same gw × the bare proxy at V8's defaults: req/s; per CPU-second | ${spreadText(h2cDefaults.map((x) => x.rps))}; ${spreadText(h2cDefaults.map((x) => x.perCpu))} | ${fmt(spread(h2cDefaults.map((x) => x.a)).median)} / ${fmt(spread(h2cDefaults.map((x) => x.b)).median)} req/s | report | ${h2cDefaults.reduce((s, x) => s + x.errors, 0)} |`,
    );
    if (h2cCompare.length)
      p(
        `| h2c, this build × the compared build (\`GW_BENCH_COMPARE\`): req/s; per CPU-second | ${spreadText(h2cCompare.map((x) => x.rps))}; ${spreadText(h2cCompare.map((x) => x.perCpu))} | ${fmt(spread(h2cCompare.map((x) => x.a)).median)} / ${fmt(spread(h2cCompare.map((x) => x.b)).median)} req/s | no worse | ${h2cCompare.reduce((s, x) => s + x.errors, 0)} |`,
      );
  }
  if (tlsRounds.length)
    p(
      `| new TLS connections/s (one request each), gw TLS listener × bare node:https (simultaneous; wrk -c${CONNS}, connection: close): per s; per CPU-second | ${spreadText(tlsRounds.map((x) => x.rps))}; ${spreadText(tlsRounds.map((x) => x.perCpu))} | ${fmt(spread(tlsRounds.map((x) => x.a)).median)} / ${fmt(spread(tlsRounds.map((x) => x.b)).median)} per s${resumed ? `; bare: ${resumed[2]} of ${resumed[1]} sessions resumed` : ''} | report | ${tlsRounds.reduce((s, x) => s + x.errors, 0)} |`,
    );
  if (grpcPairs.length)
    p(
      `| gRPC unary, gw key auth + DRL × bare node:http2 gRPC proxy (simultaneous; h2load -c${H2_CONNS} -m${H2_STREAMS}): calls/s; per CPU-second | ${spreadText(grpcPairs.map((x) => x.rps))}; ${spreadText(grpcPairs.map((x) => x.perCpu))} | ${fmt(spread(grpcPairs.map((x) => x.a)).median)} / ${fmt(spread(grpcPairs.map((x) => x.b)).median)} calls/s | report | ${grpcPairs.reduce((s, x) => s + x.errors, 0)} |`,
    );
  if (grpcRounds.length) {
    p(
      `| gRPC unary through gw × direct (sequential, interleaved; h2load -c${H2_CONNS} -m${H2_STREAMS}): calls/s | ${spreadText(grpcRounds.map((x) => x.gw.rps / x.direct.rps))} | ${fmt(spread(grpcRounds.map((x) => x.gw.rps)).median)} / ${fmt(spread(grpcRounds.map((x) => x.direct.rps)).median)} calls/s; gw ${fmt(spread(grpcRounds.map((x) => x.gwCpuUs)).median, 1)} CPU µs per call | report | ${grpcRounds.reduce((s, x) => s + x.gw.errors + x.direct.errors, 0)} |`,
    );
    p(
      `| gRPC unary, one call in flight: added by gw (mean per call, gw − direct) | ${spreadText(
        grpcRounds.map((x) => x.gwOne.meanMs - x.directOne.meanMs),
        3,
      )} ms | ${fmt(spread(grpcRounds.map((x) => x.gwOne.meanMs)).median, 3)} / ${fmt(spread(grpcRounds.map((x) => x.directOne.meanMs)).median, 3)} ms | report | ${grpcRounds.reduce((s, x) => s + x.gwOne.errors + x.directOne.errors, 0)} |`,
    );
  }
  p(
    `run time ${fmt((Date.now() - started) / 1000)} s; load average now ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
  );
  console.log(lines.join('\n'));
  writeFileSync(
    resolve('dist/bench-protocols-last.json'),
    JSON.stringify(
      { at: new Date().toISOString(), h2c, h2cDefaults, h2cCompare, tls: tlsRounds, grpc: grpcRounds, grpcPairs },
      null,
      2,
    ),
  );
}

main()
  .then(() => process.exit(0))
  .catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
