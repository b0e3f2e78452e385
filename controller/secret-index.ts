/** Which AccessKeys and OAuthClients use a Secret (by secretRef), so a Secret change requeues only them. */
import { z } from 'zod';
import type { KubeObject } from '../lib/kube/informer.js';
import { clientItem, itemKey, keyItem, type ItemOf } from './work-items.js';

const WithRef = z.looseObject({
  spec: z.looseObject({ secretRef: z.looseObject({ name: z.string() }).optional() }).optional(),
});

type User = ItemOf<'AccessKey'> | ItemOf<'OAuthClient'>;

export class SecretIndex {
  /** `ns/secret` → the work items of its users, by queue key. */
  private readonly bySecret = new Map<string, Map<string, User>>();
  /** A user's queue key → `ns/secret`. */
  private readonly byUser = new Map<string, string>();

  update(kind: 'AccessKey' | 'OAuthClient', obj: KubeObject, deleted: boolean): void {
    const ns = obj.metadata.namespace ?? 'default';
    const item = kind === 'AccessKey' ? keyItem(ns, obj.metadata.name) : clientItem(ns, obj.metadata.name);
    const user = itemKey(item);
    const prev = this.byUser.get(user);
    const ref = deleted ? undefined : WithRef.safeParse(obj).data?.spec?.secretRef?.name;
    const next = ref ? `${ns}/${ref}` : undefined;
    if (prev === next) return;
    if (prev) {
      const s = this.bySecret.get(prev);
      s?.delete(user);
      if (s?.size === 0) this.bySecret.delete(prev);
    }
    if (next) {
      const s = this.bySecret.get(next) ?? new Map<string, User>();
      s.set(user, item);
      this.bySecret.set(next, s);
      this.byUser.set(user, next);
    } else this.byUser.delete(user);
  }

  /** The AccessKeys and OAuthClients whose secretRef names `ns/secret`. */
  users(ns: string, secret: string): User[] {
    return [...(this.bySecret.get(`${ns}/${secret}`)?.values() ?? [])];
  }
}
