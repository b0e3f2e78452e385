/** A `gw controller` process of the scale benches, against the harness's kube-apiserver and redis-server. */
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync } from 'node:fs';
import { resolve } from 'node:path';

export interface BenchControllerOptions {
  kubeconfig: string;
  namespace: string;
  redis: string;
  metricsPort: number;
  /** The controller's log lines (info) go to this file; absent: warnings only, discarded. */
  logFile?: string;
  /** Node flags before the script (e.g. `--cpu-prof`). */
  nodeArgs?: string[];
  /** gw flags after the standard ones (e.g. `--resync-period 20`). */
  args?: string[];
}

/**
 * Spawns the controller; it is SIGKILLed when the bench process exits (a failed run must not leave it
 * retrying a stopped API server for ever). GW_BENCH_CONTROLLER_NODE_ARGS adds Node flags to every
 * bench's controller (`--cpu-prof --cpu-prof-dir=/tmp/prof`: stop it with SIGINT/SIGTERM to get the profile).
 */
export function spawnBenchController(o: BenchControllerOptions): ChildProcess {
  const logFd = o.logFile ? openSync(o.logFile, 'w') : undefined;
  const envNodeArgs = (process.env.GW_BENCH_CONTROLLER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const proc = spawn(
    process.execPath,
    [
      ...envNodeArgs,
      ...(o.nodeArgs ?? []),
      resolve('dist/cli/gw.js'),
      'controller',
      '--kubeconfig',
      o.kubeconfig,
      '--namespace',
      o.namespace,
      '--redis',
      o.redis,
      '--metrics-listen',
      `127.0.0.1:${o.metricsPort}`,
      ...(o.args ?? []),
    ],
    {
      stdio: ['ignore', logFd ?? 'ignore', logFd ?? 'ignore'],
      env: { ...process.env, GW_LOG_LEVEL: logFd === undefined ? 'warn' : 'info' },
    },
  );
  process.once('exit', () => proc.kill('SIGKILL'));
  return proc;
}
