/**
 * The sidecar's config in a cluster: the ConfigMap the controller writes, listed then watched through
 * the API server (lib/kube/informer.ts: fieldSelector metadata.name=gw-config, which is all the chart's
 * RBAC allows; an ended watch resumes, 410 Gone relists, failures retry with exponential backoff). A bad
 * config is refused (log line + metric) and the previous one kept; while the API server is unreachable
 * the last good config keeps serving. A deleted ConfigMap keeps the last config too. A large namespace's
 * config is sharded (contract/config-shards.ts): gw-config then holds the index, and the shards it lists
 * are read by name when their SHA-256 changes (shard-set.ts) — still only ConfigMaps named gw-config*. No
 * @kubernetes/client-node here: it alone would outweigh the rest of the sidecar's memory.
 */
import type { Logger } from '../../lib/logger.js';
import type { KubeApi } from '../../lib/kube/api.js';
import { Informer, type KubeObject, type ResourceRef } from '../../lib/kube/informer.js';
import type { CompiledConfig } from '../../contract/config.js';
import { CONFIG_MAP_KEY, CONFIG_MAP_NAME, ConfigMapData, parseCompiledConfig } from '../../contract/config-schema.js';
import { CONFIG_INDEX_KEY, ShardIndexSchema } from '../../contract/config-shards.js';
import { codeOf, resourcePath } from '../../lib/kube/api.js';
import { ShardSet } from './shard-set.js';

const CONFIG_MAPS: ResourceRef = { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap' };

export class KubeConfigSource {
  private config: CompiledConfig = { hash: '', apis: [], policies: {} };
  /** The config.json text applied: a ConfigMap is applied when its text changes (not its self-declared hash). */
  private text: string | undefined;
  private loaded = false;
  private informer?: Informer;
  private readonly shards: ShardSet;

  constructor(
    private readonly api: KubeApi,
    private readonly namespace: string,
    private readonly logger: Logger,
    private readonly onRefused: () => void = () => {},
    private readonly onApplied: (c: CompiledConfig) => void = () => {},
  ) {
    this.shards = new ShardSet({
      read: async (name) => {
        try {
          return await this.api.get(resourcePath(CONFIG_MAPS, this.namespace, name));
        } catch (e) {
          if (codeOf(e) === 404) return undefined;
          throw e;
        }
      },
      onConfig: (c, read, ms) => this.use(c, { shards: read, ms: { ...ms } }),
      onRefused: (reason) => this.refuse(reason),
      onWaiting: (reason, retryInMs) => this.logger.info({ retryInMs }, `config shards not complete yet: ${reason}`),
    });
  }

  current(): CompiledConfig {
    return this.config;
  }

  isLoaded(): boolean {
    return this.loaded;
  }

  /** Resolves after the first read of the ConfigMap, or its first failure (then retried in the background). */
  start(): Promise<void> {
    return new Promise<void>((resolve) => {
      let firstError = true;
      this.informer = new Informer({
        api: this.api,
        resource: CONFIG_MAPS,
        namespace: this.namespace,
        fieldSelector: `metadata.name=${CONFIG_MAP_NAME}`,
        logger: this.logger,
        onChange: (type, obj) => {
          if (type !== 'delete' && obj.metadata.name === CONFIG_MAP_NAME) this.apply(obj);
        },
        onError: (err, retryInMs) => {
          this.logger.warn(
            { err: err.message, retryInMs },
            this.informer?.hasSynced()
              ? 'config watch failed; restarting (keeping the last good config)'
              : 'cannot read config from the API server; keeping the last good config',
          );
          if (firstError) {
            firstError = false;
            resolve();
          }
        },
      });
      void this.informer.whenSynced().then(resolve);
      this.informer.start();
    });
  }

  stop(): void {
    this.informer?.stop();
    this.shards.stop();
  }

  private apply(cm: KubeObject): void {
    const parsed = ConfigMapData.safeParse(cm);
    const data = parsed.success ? parsed.data.data : undefined;
    const text = data?.[CONFIG_MAP_KEY];
    const indexText = text === undefined ? data?.[CONFIG_INDEX_KEY] : undefined;
    if (text === undefined && indexText === undefined)
      return this.refuse(`neither data.${CONFIG_MAP_KEY} nor data.${CONFIG_INDEX_KEY}`);
    const seen = text ?? indexText;
    if (seen === this.text) return; // a resync of what is applied (or being read)
    this.text = seen;
    if (text !== undefined) {
      this.shards.clear();
      const t0 = performance.now();
      const r = parseCompiledConfig(text);
      if (!r.ok) return this.refuse(r.message);
      return this.use(r.config, { ms: { validate: Math.round(performance.now() - t0) } });
    }
    let raw: unknown;
    try {
      raw = JSON.parse(indexText!);
    } catch (e) {
      return this.refuse(`${CONFIG_INDEX_KEY}: invalid JSON: ${(e as Error).message}`);
    }
    const index = ShardIndexSchema.safeParse(raw);
    if (!index.success) {
      const i = index.error.issues[0]!;
      return this.refuse(`${CONFIG_INDEX_KEY}: ${i.path.join('.')}: ${i.message}`);
    }
    this.shards.load(index.data);
  }

  /** `extra.ms`: the durations of the steps before (shards read, validated, assembled); `apply` is added here. */
  private use(config: CompiledConfig, extra: { shards?: number; ms?: Record<string, number> }): void {
    this.config = config;
    this.loaded = true;
    const t0 = performance.now();
    this.onApplied(config);
    const ms = { ...extra.ms, apply: Math.round(performance.now() - t0) };
    this.logger.info({ hash: config.hash, apis: config.apis.length, ...extra, ms }, 'config applied');
  }

  /** A bad ConfigMap: a line and the metric, the previous config kept (read again when it changes). */
  private refuse(reason: string): void {
    this.onRefused();
    this.logger.error(
      { configMap: `${this.namespace}/${CONFIG_MAP_NAME}` },
      `config refused, keeping the previous one: ${reason}`,
    );
  }
}
