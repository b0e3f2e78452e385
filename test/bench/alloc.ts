/**
 * Heap bytes allocated per proxied request, for the bare node:http + undici proxy and for gw (key auth +
 * DRL, the `make bench` setup). Allocation does not depend on CPU load, so unlike req/s this figure is
 * stable on a busy machine. Each proxy runs with alloc-probe.js preloaded; this process is the upstream
 * (a small JSON body) and the client (an undici Pool, keep-alive, GW_ALLOC_CONNECTIONS connections).
 * After GW_ALLOC_WARMUP requests (JIT, pools, caches), GW_ALLOC_REQUESTS requests are counted.
 *
 *   node dist/test/bench/alloc.js            → one JSON line per proxy: bytes/request, scavenges
 *   GW_ALLOC_ONLY=gw GW_ALLOC_PROFILE=/tmp/gw.heapprofile node dist/test/bench/alloc.js
 *                                            → also a sampling profile of the counted allocations (alloc-probe.ts)
 *   GW_ALLOC_ONLY=gw|bare                    → measure one proxy
 *   GW_ALLOC_PROTOCOL=h2c                    → HTTP/2 with prior knowledge (GW_ALLOC_CONNECTIONS sessions of
 *                                              GW_ALLOC_STREAMS streams each), the bare proxy bare-protocols.ts h2c
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { connect as h2connect } from 'node:http2';
import { Pool } from 'undici';
import { freePort } from '../harness/ports.js';
import { BENCH_KEY, GW_BENCH_ENV, GW_NODE_FLAGS, gwStandaloneBench } from './gw-bench-setup.js';
import { stopChild } from './proc.js';

const N = Number(process.env.GW_ALLOC_REQUESTS ?? 20_000);
const WARMUP = Number(process.env.GW_ALLOC_WARMUP ?? 10_000);
const CONNS = Number(process.env.GW_ALLOC_CONNECTIONS ?? 16);
const FLAGS = (process.env.GW_ALLOC_NODE_FLAGS ?? '').split(' ').filter(Boolean);
const ONLY = process.env.GW_ALLOC_ONLY;
const H2C = process.env.GW_ALLOC_PROTOCOL === 'h2c';
const STREAMS = Number(process.env.GW_ALLOC_STREAMS ?? 10);
const PROBE = resolve('dist/test/bench/alloc-probe.js');

export interface AllocResult {
  proxy: string;
  requests: number;
  bytesPerRequest: number;
  scavenges: number;
  scavengeMsPerSecond: number;
  errors: number;
}

interface ProbeAnswer {
  started?: boolean;
  allocated?: number;
  scavenges?: number;
  scavengeMs?: number;
}

function ask(c: ChildProcess, msg: string): Promise<ProbeAnswer> {
  return new Promise((r) => {
    c.once('message', (m) => r(m as ProbeAnswer));
    c.send(msg);
  });
}

function spawnProxy(
  args: string[],
  ready: string,
  env: NodeJS.ProcessEnv = process.env,
  nodeFlags: readonly string[] = [],
): Promise<{ c: ChildProcess; out: () => string }> {
  const c = fork(args[0]!, args.slice(1), {
    execArgv: ['--import', PROBE, ...nodeFlags, ...FLAGS],
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env,
  });
  let out = '';
  c.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  c.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`proxy did not start:\n${out}`)), 20_000);
    const poll = setInterval(() => {
      if (out.includes(ready)) {
        clearTimeout(t);
        clearInterval(poll);
        res({ c, out: () => out });
      }
    }, 50);
    c.once('exit', (code) => (clearTimeout(t), clearInterval(poll), rej(new Error(`proxy exited ${code}:\n${out}`))));
  });
}

let counted = N;
let warmup = WARMUP;

/** `n` GETs over h2c: CONNS sessions, STREAMS streams at once on each. */
async function loadH2(origin: string, path: string, n: number, auth?: string): Promise<number> {
  const sessions = Array.from({ length: CONNS }, () => h2connect(origin));
  let left = n;
  let errors = 0;
  const worker = async (i: number): Promise<void> => {
    const s = sessions[i % CONNS]!;
    while (left-- > 0)
      await new Promise<void>((done) => {
        const st = s.request({ ':path': path, ...(auth ? { authorization: auth } : {}) });
        st.on('response', (h) => void (h[':status'] !== 200 && errors++));
        st.on('error', () => (errors++, done()));
        st.resume();
        st.on('end', done);
      });
  };
  await Promise.all(Array.from({ length: CONNS * STREAMS }, (_, i) => worker(i)));
  for (const s of sessions) s.close();
  return errors;
}

async function load(origin: string, path: string, n: number, auth?: string): Promise<number> {
  if (H2C) return loadH2(origin, path, n, auth);
  const pool = new Pool(origin, { connections: CONNS, pipelining: 1 });
  const headers = auth ? { authorization: auth } : {};
  let left = n;
  let errors = 0;
  const worker = async (): Promise<void> => {
    while (left-- > 0) {
      const r = await pool.request({ path, method: 'GET', headers });
      await r.body.text();
      if (r.statusCode !== 200) errors++;
    }
  };
  await Promise.all(Array.from({ length: CONNS }, worker));
  await pool.close();
  return errors;
}

async function measure(
  name: string,
  c: ChildProcess,
  origin: string,
  path: string,
  auth?: string,
): Promise<AllocResult> {
  let errors = await load(origin, path, warmup, auth);
  await ask(c, 'start');
  const t0 = performance.now();
  errors += await load(origin, path, counted, auth);
  const seconds = (performance.now() - t0) / 1000;
  const a = await ask(c, 'stop');
  return {
    proxy: name,
    requests: counted,
    bytesPerRequest: Math.round(a.allocated! / counted),
    scavenges: a.scavenges!,
    scavengeMsPerSecond: Number((a.scavengeMs! / seconds).toFixed(1)),
    errors,
  };
}

/** `only`: 'gw' or 'bare' (default both); `requests` counted after `warmup` (defaults: the env, 20,000 / 10,000). */
export async function allocPerRequest(only?: string, requests = N, warm = WARMUP): Promise<AllocResult[]> {
  counted = requests;
  warmup = warm;
  const body = '{"ok":true,"service":"bench"}';
  const up = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  });
  await new Promise<void>((r) => up.listen(0, '127.0.0.1', r));
  const addr = up.address();
  const upstream = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  const dir = mkdtempSync(join(tmpdir(), 'gw-alloc-'));
  const results: AllocResult[] = [];
  try {
    if (only !== 'gw') {
      const port = await freePort();
      const { c } = await spawnProxy(
        H2C
          ? [resolve('dist/test/bench/bare-protocols.js'), 'h2c', String(port), upstream]
          : [resolve('dist/test/bench/bare-proxy.js'), String(port), upstream],
        'bare proxy ready',
      );
      try {
        const name = H2C ? 'bare node:http2 + undici' : 'bare node:http + undici';
        results.push(await measure(name, c, `http://127.0.0.1:${port}`, '/api/x'));
      } finally {
        await stopChild(c, 10_000);
      }
    }
    if (only !== 'bare') {
      const args = await gwStandaloneBench(dir, upstream);
      // with the V8 flags of an injected sidecar (GW_BENCH_ENV's NODE_OPTIONS, the image's entrypoint flags)
      const { c, out } = await spawnProxy(args, 'gw standalone ready:', GW_BENCH_ENV, GW_NODE_FLAGS);
      try {
        const origin = /gateway (http:\/\/[^\s]+)/.exec(out())![1]!;
        results.push(await measure('gw key auth + DRL', c, origin, '/api/x', BENCH_KEY));
      } finally {
        await stopChild(c, 10_000);
      }
    }
  } finally {
    up.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
}

if (process.argv[1] && resolve(process.argv[1]) === resolve('dist/test/bench/alloc.js')) {
  for (const r of await allocPerRequest(ONLY)) console.log(JSON.stringify(r));
}
