/**
 * The sidecar's config in a cluster: the ConfigMap the controller writes, listed then watched through
 * the API server (lib/kube/informer.ts: fieldSelector metadata.name=gw-config, which is all the chart's
 * RBAC allows; an ended watch resumes, 410 Gone relists, failures retry with exponential backoff). A bad
 * config is refused (log line + metric) and the previous one kept; while the API server is unreachable
 * the last good config keeps serving. A deleted ConfigMap keeps the last config too. No
 * @kubernetes/client-node here: it alone would be ~50 MB of the sidecar's RSS.
 */
import type { Logger } from '../../lib/logger.js';
import type { KubeApi } from '../../lib/kube/api.js';
import { Informer, type KubeObject, type ResourceRef } from '../../lib/kube/informer.js';
import type { CompiledConfig } from '../../contract/config.js';
import { CONFIG_MAP_KEY, CONFIG_MAP_NAME, ConfigMapData, parseCompiledConfig } from '../../contract/config-schema.js';

const CONFIG_MAPS: ResourceRef = { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap' };

export class KubeConfigSource {
  private config: CompiledConfig = { hash: '', apis: [], policies: {} };
  /** The config.json text applied: a ConfigMap is applied when its text changes (not its self-declared hash). */
  private text: string | undefined;
  private loaded = false;
  private informer?: Informer;

  constructor(
    private readonly api: KubeApi,
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
  }

  private apply(cm: KubeObject): void {
    const parsed = ConfigMapData.safeParse(cm);
    const text = parsed.success ? parsed.data.data?.[CONFIG_MAP_KEY] : undefined;
    if (text === undefined) return this.refuse(`no data.${CONFIG_MAP_KEY}`);
    if (text === this.text && this.loaded) return; // a resync of what is applied
    const r = parseCompiledConfig(text);
    if (!r.ok) return this.refuse(r.message);
    this.text = text;
    this.config = r.config;
    this.loaded = true;
    this.onApplied(r.config);
    this.logger.info({ hash: r.config.hash, apis: r.config.apis.length }, 'config applied');
  }

  /** A bad ConfigMap: a line and the metric, the previous config kept. */
  private refuse(reason: string): void {
    this.onRefused();
    this.logger.error(
      { configMap: `${this.namespace}/${CONFIG_MAP_NAME}` },
      `config refused, keeping the previous one: ${reason}`,
    );
  }
}
