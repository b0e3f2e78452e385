/**
 * Standalone's reconciler: the manifests directory → compiled config + sessions, the same job the
 * operator does in a cluster (ConfigMaps + Redis), done in process.
 */
import { stringify } from 'yaml';
import type { Logger } from '../../lib/logger.js';
import type { SessionStore, StoredSession } from '../../lib/sessions.js';
import type { CompiledConfig } from '../../sidecar/config/types.js';
import { compileConfig } from '../compile/compile-config.js';
import { keyMaterial, sessionOf, snapshotSecrets } from '../compile/key-sessions.js';
import type { ResourceSnapshot } from '../sources/snapshot.js';
import { missingReferences, referenceIndex } from './references.js';
const { randomBytes } = process.getBuiltinModule('node:crypto');
const { mkdirSync, writeFileSync, existsSync } = process.getBuiltinModule('node:fs');
const { join } = process.getBuiltinModule('node:path');

export class StandaloneState {
  private config: CompiledConfig = { hash: '', apis: [], policies: {} };
  private sessionsJson = new Map<string, string>();
  private applying: Promise<void> = Promise.resolve();
  /** The missing references last logged per resource, so a directory change logs only what changed. */
  private reported = new Map<string, string>();
  /** Write every session on the next apply (resync), not only the changed ones. */
  private rewrite = false;

  constructor(
    private readonly dir: string,
    private readonly sessions: SessionStore,
    private readonly logger: Logger,
    private readonly onKeyAdded: (keyHash: string, stored: StoredSession, annotations: Record<string, string>) => Promise<void> = async () => {},
  ) {}

  current(): CompiledConfig {
    return this.config;
  }

  /** Serialised: snapshots are applied one after another, in order. */
  apply(snapshot: ResourceSnapshot, rewrite = false): Promise<void> {
    this.applying = this.applying
      .then(() => {
        if (rewrite) this.rewrite = true;
        return this.applyNow(snapshot);
      })
      .catch((e: unknown) => {
        this.logger.error({ err: (e as Error).message }, 'applying resources failed');
      });
    return this.applying;
  }

  private async applyNow(snapshot: ResourceSnapshot): Promise<void> {
    const { config, problems } = compileConfig(snapshot.apis, snapshot.policies);
    for (const p of problems) this.logger.warn({ kind: p.kind, namespace: p.namespace, name: p.name }, `resource refused: ${p.message}`);
    if (config.hash !== this.config.hash) {
      this.config = config;
      this.logger.info({ apis: config.apis.length, policies: Object.keys(config.policies).length, hash: config.hash }, 'config applied');
    }

    this.reportMissing(snapshot);
    const next = new Map<string, { stored: StoredSession; annotations: Record<string, string> }>();
    const secrets = snapshotSecrets(snapshot);
    for (const key of snapshot.keys) {
      const m = keyMaterial(key, secrets);
      if (!m.ok) {
        this.generateSecret(key.metadata.namespace, key.spec.secretRef!.name, key.spec.secretRef!.key, key.metadata.name);
        continue;
      }
      if (next.has(m.keyHash)) {
        this.logger.warn({ name: key.metadata.name }, 'AccessKey refused: another AccessKey has the same key');
        continue;
      }
      next.set(m.keyHash, { stored: sessionOf(key), annotations: key.metadata.annotations ?? {} });
    }
    for (const [hash, { stored, annotations }] of next) {
      const json = JSON.stringify(stored);
      if (!this.rewrite && this.sessionsJson.get(hash) === json) continue;
      const isNew = !this.sessionsJson.has(hash);
      await this.sessions.put(hash, stored);
      this.sessionsJson.set(hash, json);
      if (isNew) await this.onKeyAdded(hash, stored, annotations);
    }
    for (const hash of [...this.sessionsJson.keys()]) {
      if (!next.has(hash)) {
        await this.sessions.delete(hash);
        this.sessionsJson.delete(hash);
      }
    }
    this.rewrite = false;
  }

  /**
   * Applies `snapshot` writing every session again, even unchanged ones: the store is back after a lost
   * connection, possibly empty (a Redis restarted without persistence), and the directory is the source
   * of truth. Keys written before are not additions: their quotas are not reset. Should the writes fail,
   * the next apply writes everything again too.
   */
  resync(snapshot: ResourceSnapshot): Promise<void> {
    return this.apply(snapshot, true);
  }

  /** Logs (once per change) AccessKeys and OAuthClients that refer to a policy or an API the directory lacks. */
  private reportMissing(snapshot: ResourceSnapshot): void {
    const now = new Map<string, string>();
    const index = referenceIndex(snapshot);
    for (const r of [...snapshot.keys, ...snapshot.clients]) {
      const missing = missingReferences(r, index);
      if (missing === undefined) continue;
      const id = `${r.kind} ${r.metadata.namespace}/${r.metadata.name}`;
      now.set(id, missing);
      if (this.reported.get(id) !== missing) this.logger.warn({ kind: r.kind, namespace: r.metadata.namespace, name: r.metadata.name }, `${id} refers to something missing: ${missing}`);
    }
    this.reported = now;
  }

  /** A secretRef to a missing Secret: generate a random key into a new Secret manifest (as the operator does). */
  private generateSecret(namespace: string, name: string, dataKey: string, keyName: string): void {
    const dir = join(this.dir, '.gw');
    const file = join(dir, `secret-${namespace}-${name}.yaml`);
    if (existsSync(file)) return;
    mkdirSync(dir, { recursive: true });
    const secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace, labels: { 'app.kubernetes.io/managed-by': 'gw' } },
      type: 'Opaque',
      data: { [dataKey]: Buffer.from(randomBytes(24).toString('base64url')).toString('base64') },
    };
    writeFileSync(file, stringify(secret), { mode: 0o600 });
    this.logger.info({ accessKey: keyName, secret: `${namespace}/${name}` }, 'generated a random key into a new Secret');
  }
}
