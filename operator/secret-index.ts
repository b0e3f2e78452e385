/** Which AccessKeys and OAuthClients use a Secret (by secretRef), so a Secret change requeues only them. */
import { z } from 'zod';
import type { KubeObject } from '../lib/kube/informer.js';

const WithRef = z.looseObject({
  spec: z.looseObject({ secretRef: z.looseObject({ name: z.string() }).optional() }).optional(),
});

export class SecretIndex {
  private readonly bySecret = new Map<string, Set<string>>();
  private readonly byUser = new Map<string, string>();

  update(kind: 'AccessKey' | 'OAuthClient', obj: KubeObject, deleted: boolean): void {
    const ns = obj.metadata.namespace ?? 'default';
    const user = `${kind}|${ns}|${obj.metadata.name}`;
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
      const s = this.bySecret.get(next) ?? new Set<string>();
      s.add(user);
      this.bySecret.set(next, s);
      this.byUser.set(user, next);
    } else this.byUser.delete(user);
  }

  users(ns: string, secret: string): string[] {
    return [...(this.bySecret.get(`${ns}/${secret}`) ?? [])];
  }
}
