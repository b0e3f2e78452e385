/**
 * `gw controller`: runs the operator (cli/controller-main.ts) in a worker thread whose young
 * generation is capped. Reconciling thousands of objects allocates fast, and V8 then grows the young
 * generation to 64 MB and more; the cap (`resourceLimits.maxYoungGenerationSizeMb`, 8 MB) is what keeps
 * the controller's RSS in budget, and Node cannot change it after start-up any other way. The main
 * thread only forwards SIGTERM/SIGINT (graceful drain in the worker) and exits with the worker's code.
 * GW_CONTROLLER_THREAD=off runs everything in the main thread.
 */
const { isMainThread, parentPort, Worker, workerData } = process.getBuiltinModule('node:worker_threads');

export interface ControllerFlags {
  kubeconfig?: string;
  namespace?: string;
  redis?: string;
  leaderElect?: boolean | string;
  metricsListen: string;
  resyncPeriod: string;
  leaseDuration: string;
  leaseNamespace?: string;
  identity?: string;
  concurrency: string;
  storeCheckPeriod: string;
}

const WORKER_TAG = 'gw-controller';

export async function runController(flags: ControllerFlags): Promise<void> {
  if (process.env.GW_CONTROLLER_THREAD === 'off') {
    const { runControllerProcess } = await import('./controller-main.js');
    return runControllerProcess(flags);
  }
  const worker = new Worker(new URL(import.meta.url), {
    workerData: { tag: WORKER_TAG, flags },
    resourceLimits: { maxYoungGenerationSizeMb: 8 },
  });
  // the first signal starts the worker's drain; a second one (either kind) exits at once, as cli/shutdown.ts does
  let signalled = false;
  const stop = (signal: string): void => {
    if (signalled) {
      process.stdout.write(
        `${JSON.stringify({ level: 40, time: Date.now(), component: 'controller', signal, msg: 'second signal while draining: exiting now' })}\n`,
      );
      process.exit(1);
    }
    signalled = true;
    worker.postMessage('shutdown');
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  await new Promise<void>((resolve, reject) => {
    worker.once('error', reject);
    // No process.exit here: the worker's last log lines (its stdout reaches this thread through a
    // message port) would be lost. Nothing else keeps this thread alive, so it ends once they are out.
    worker.once('exit', (code) => {
      process.exitCode = code;
      resolve();
    });
  });
}

// Inside the worker: run the operator; the main thread's 'shutdown' message starts the drain.
const data = workerData as { tag?: string; flags?: ControllerFlags } | null;
if (!isMainThread && data?.tag === WORKER_TAG && data.flags) {
  const { runControllerProcess } = await import('./controller-main.js');
  await runControllerProcess(data.flags, (drainAll) => {
    let started = false;
    parentPort!.on('message', (m: unknown) => {
      if (m !== 'shutdown' || started) return;
      started = true;
      drainAll().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
  });
}
