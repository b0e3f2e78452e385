/**
 * The sidecar's config in a cluster: the ConfigMap the controller writes, read then watched through the
 * API server. A bad config is refused (log line + metric) and the previous one kept; while the API
 * server is unreachable the last good config keeps serving and the watch restarts with backoff.
 */
import { CoreV1Api, Watch, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import type { Logger } from '../../lib/logger.js';
import type { CompiledConfig } from './types.js';
import { CONFIG_MAP_KEY, CONFIG_MAP_NAME, parseCompiledConfig } from './schema.js';

export class KubeConfigSource {
  private config: CompiledConfig = { hash: '', apis: [], policies: {} };
  private loaded = false;
  private stopped = false;
  private abort?: AbortController;
  private backoffMs = 500;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly kc: KubeConfig,
    private readonly namespace: string,
    private readonly logger: Logger,
    private readonly onRefused: () => void = () => {},
    private readonly onApplied: (c: CompiledConfig) => void = () => {},
  ) {}

  current(): CompiledConfig {
    return this.config;
  }

  isLoaded(): boolean {
    return this.loaded;
  }

  async start(): Promise<void> {
    await this.loop();
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
    if (this.timer) clearTimeout(this.timer);
  }

  private apply(cm: V1ConfigMap | undefined): void {
    const text = cm?.data?.[CONFIG_MAP_KEY];
    if (text === undefined) return;
    const r = parseCompiledConfig(text);
    if (!r.ok) {
      this.onRefused();
      this.logger.error({ configMap: `${this.namespace}/${CONFIG_MAP_NAME}` }, `config refused, keeping the previous one: ${r.message}`);
      return;
    }
    if (r.config.hash !== this.config.hash || !this.loaded) {
      this.config = r.config;
      this.loaded = true;
      this.onApplied(r.config);
      this.logger.info({ hash: r.config.hash, apis: r.config.apis.length }, 'config applied');
    }
  }

  private async loop(): Promise<void> {
    if (this.stopped) return;
    let resourceVersion: string | undefined;
    try {
      const core = this.kc.makeApiClient(CoreV1Api);
      const cm = await core.readNamespacedConfigMap({ name: CONFIG_MAP_NAME, namespace: this.namespace }).catch((e: { code?: number }) => {
        if (e.code === 404) return undefined;
        throw e;
      });
      this.apply(cm);
      resourceVersion = cm?.metadata?.resourceVersion;
      this.backoffMs = 500;
    } catch (e) {
      this.logger.warn({ err: (e as Error).message }, 'cannot read config from the API server; keeping the last good config');
      return this.retry();
    }
    try {
      this.abort = await new Watch(this.kc).watch(
        `/api/v1/namespaces/${this.namespace}/configmaps`,
        { fieldSelector: `metadata.name=${CONFIG_MAP_NAME}`, resourceVersion, allowWatchBookmarks: true },
        (phase: string, obj: V1ConfigMap) => {
          if (phase === 'ADDED' || phase === 'MODIFIED') this.apply(obj);
        },
        (err: unknown) => {
          if (!this.stopped) {
            if (err) this.logger.warn({ err: String((err as Error).message ?? err) }, 'config watch ended; restarting');
            this.retry();
          }
        },
      );
    } catch (e) {
      this.logger.warn({ err: (e as Error).message }, 'config watch failed; restarting');
      this.retry();
    }
  }

  private retry(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.loop(), this.backoffMs);
    this.backoffMs = Math.min(this.backoffMs * 2, 30_000);
  }
}
