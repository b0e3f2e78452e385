/**
 * The stream manager a gateway holds: it loads the streams code (pipelines, inputs, outputs, their
 * metrics) on the first config with a `spec.streaming`, so a gateway without streams does not carry it
 * (a few MB of idle RSS, docs/benchmarks.md "Memory under load").
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import type { LimitInfo, StreamApi, StreamInfo, StreamManager, StreamManagerOptions } from './manager.js';

export function createStreamsOnDemand(opts: StreamManagerOptions): StreamManager {
  let inner: StreamManager | undefined;
  let loading: Promise<StreamManager> | undefined;
  let registry: Registry | undefined;
  let stopped = false;

  function load(): Promise<StreamManager> {
    loading ??= import('./manager.js').then((m) => {
      inner = m.createStreamManager(opts);
      if (registry) inner.metrics(registry);
      return inner;
    });
    return loading;
  }

  return {
    async apply(apis: StreamApi[]): Promise<void> {
      if (stopped) return;
      if (!inner && !loading && !apis.some((a) => a.streaming !== undefined)) return;
      await (await load()).apply(apis);
    },
    tryHandle(apiId: string, relPath: string, req: IncomingMessage, res: ServerResponse): boolean {
      return inner?.tryHandle(apiId, relPath, req, res) ?? false;
    },
    metrics(r: Registry): void {
      registry = r;
      inner?.metrics(r);
    },
    list: (): StreamInfo[] => inner?.list() ?? [],
    limits: (): LimitInfo[] => inner?.limits() ?? [],
    async stop(): Promise<void> {
      stopped = true;
      if (loading) await (await loading).stop();
    },
  };
}
