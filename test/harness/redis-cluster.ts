/**
 * A real 3-master Redis Cluster on loopback for the limiter tests: three `redis-server
 * --cluster-enabled yes` processes joined by `redis-cli --cluster create` (no replicas), ready when
 * every node reports cluster_state:ok. Also a private single redis-server that a test may stop and
 * restart (store outage).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { bindable, freePort } from './ports.js';

const run = promisify(execFile);

export interface Node {
  port: number;
  proc: ChildProcess;
  dir: string;
}

async function waitFor(check: () => Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function ping(port: number): Promise<boolean> {
  const c = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  c.on('error', () => {});
  try {
    await c.connect();
    return (await c.ping()) === 'PONG';
  } finally {
    c.disconnect();
  }
}

/** A free port whose cluster bus port (port + 10000, which a cluster node listens on too) is free as well. */
async function freeClusterPort(): Promise<number> {
  for (;;) {
    const p = await freePort();
    if (p + 10_000 <= 65_535 && (await bindable(p + 10_000))) return p;
  }
}

/**
 * Starts a redis-server on `port` (a fresh free port by default) with extra arguments. A server that exits
 * before it answers (its port, or its cluster bus port, taken in the meantime by another process) is started
 * again on other ports, twice at most, unless the port was given.
 */
export async function startNode(extra: string[] = [], port?: number, dir?: string): Promise<Node> {
  const cluster = extra.includes('--cluster-enabled');
  for (let attempt = 0; ; attempt++) {
    const p = port ?? (cluster ? await freeClusterPort() : await freePort());
    const d = dir ?? mkdtempSync(join(tmpdir(), 'gw-node-'));
    const bin = process.env.GW_REDIS_SERVER ?? 'redis-server';
    const proc = spawn(
      bin,
      ['--port', String(p), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', d, ...extra],
      { stdio: 'ignore', cwd: d },
    );
    const exited = (): boolean => proc.exitCode !== null || proc.signalCode !== null;
    await waitFor(async () => exited() || (await ping(p)), `redis-server on ${p}`);
    if (!exited()) return { port: p, proc, dir: d };
    if (port !== undefined || attempt >= 2) throw new Error(`redis-server on ${p} exited (${proc.exitCode})`);
    if (dir === undefined) rmSync(d, { recursive: true, force: true });
    // a cluster node may have written its config (its id, its ports) before it failed to bind
    const conf = extra.indexOf('--cluster-config-file');
    if (conf >= 0) rmSync(extra[conf + 1]!, { force: true });
  }
}

/** SIGKILL-free stop: SIGTERM and wait for the exit. `keepDir` to restart on the same port and dir. */
export async function stopNode(n: Node, keepDir = false): Promise<void> {
  if (n.proc.exitCode === null && n.proc.signalCode === null) {
    const exited = new Promise((r) => n.proc.once('exit', r));
    n.proc.kill('SIGTERM');
    await exited;
  }
  if (!keepDir) rmSync(n.dir, { recursive: true, force: true });
}

export interface RedisClusterHandle {
  nodes: Node[];
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3` */
  url: string;
  stop(): Promise<void>;
}

export async function startRedisCluster(masters = 3): Promise<RedisClusterHandle> {
  const nodes: Node[] = [];
  for (let i = 0; i < masters; i++) {
    const dir = mkdtempSync(join(tmpdir(), 'gw-cluster-'));
    nodes.push(
      await startNode(
        [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          join(dir, 'nodes.conf'),
          '--cluster-node-timeout',
          '2000',
        ],
        undefined,
        dir,
      ),
    );
  }
  const cli = process.env.GW_REDIS_CLI ?? 'redis-cli';
  await run(
    cli,
    ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'],
    { timeout: 30_000 },
  );
  for (const n of nodes) {
    const c = new Redis({ port: n.port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
    await waitFor(
      async () => String(await c.call('CLUSTER', 'INFO')).includes('cluster_state:ok'),
      `cluster_state:ok on ${n.port}`,
    );
    c.disconnect();
  }
  return {
    nodes,
    url: `redis+cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}`,
    async stop() {
      await Promise.all(nodes.map((n) => stopNode(n)));
    },
  };
}
