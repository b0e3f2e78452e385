/**
 * OAuthClient → client record in Redis: `gw:oauth:client:<namespace>/<api_id>/<client_id>` (each part
 * URI-encoded), JSON validated with ClientRecordSchema when read (contract/oauth/clients.ts, which the
 * gateways read it with). The client secret comes from the
 * Secret of spec.secretRef and is stored only as its SHA-256 (`secret_hash`); verifyClientSecret
 * compares in constant time. dcr_registration.access_token is a credential too and is left out.
 * The record is written only when the API (api_id), the policy (policy_id, when set) and the Secret
 * all exist; otherwise Ready=False says which is missing and the record written for it is removed.
 * Finalizer gw.io/client-cleanup removes the record before the OAuthClient goes.
 * status.recordKey remembers the Redis key written, so a changed client_id or api_id cleans up the old one.
 */
import { z } from 'zod';
import { OAuthClientResource, secretValue } from '../crds/kinds.js';
import { clientRecordOf, missingClientReferences } from '../compiler/client-records.js';
import {
  CLIENT_CHANNEL,
  CLIENT_PREFIX,
  clientRecordKey,
  readClientRecord,
  verifyClientSecret,
  type ClientRecord,
} from '../contract/oauth/clients.js';
import {
  referencedSecret,
  ensureFinalizer,
  firstIssue,
  REFS,
  removeFinalizer,
  report,
  storeCall,
  StoreUnavailable,
  type OperatorContext,
} from './context.js';
import type { KubeObject } from '../lib/kube/informer.js';
import { notReady, notReadyAll, ok } from './status.js';

export const CLIENT_FINALIZER = 'gw.io/client-cleanup';
export { CLIENT_CHANNEL, CLIENT_PREFIX, clientRecordKey, readClientRecord, verifyClientSecret };
export type { ClientRecord };

const ClientStatus = z.looseObject({ status: z.looseObject({ recordKey: z.string().optional() }).optional() });

async function removeRecord(ctx: OperatorContext, key: string): Promise<void> {
  const n = await storeCall(ctx.redis!.del(key));
  if (n > 0) {
    await storeCall(ctx.redis!.publish(CLIENT_CHANNEL, key));
    ctx.metrics.writes.inc({ target: 'client_delete' });
  }
}

export async function reconcileClient(ctx: OperatorContext, ns: string, name: string): Promise<void> {
  const inf = ctx.informers.clients;
  let raw: KubeObject | undefined = inf.get(ns, name);
  if (!raw) return;
  const previous = ClientStatus.safeParse(raw).data?.status?.recordKey;

  if (raw.metadata.deletionTimestamp) {
    if (!raw.metadata.finalizers?.includes(CLIENT_FINALIZER)) return;
    if (!ctx.redis) throw new StoreUnavailable('no --redis: cannot clean up the client record');
    const keys = new Set<string>();
    if (previous) keys.add(previous);
    const p = OAuthClientResource.safeParse(raw);
    if (p.success) keys.add(clientRecordKey(ns, p.data.spec.api_id, p.data.spec.client_id));
    for (const k of keys) await removeRecord(ctx, k);
    await removeFinalizer(ctx, REFS.OAuthClient, inf, raw, CLIENT_FINALIZER);
    return;
  }

  raw = await ensureFinalizer(ctx, REFS.OAuthClient, inf, raw, CLIENT_FINALIZER);
  ctx.metrics.validated.inc({ kind: 'OAuthClient' });
  const parsed = OAuthClientResource.safeParse(raw);
  if (!parsed.success)
    return void (await report(ctx, REFS.OAuthClient, inf, raw, notReady('InvalidSpec', firstIssue(parsed.error))));
  const c = parsed.data;
  const recordKey = clientRecordKey(ns, c.spec.api_id, c.spec.client_id);

  const secretObj = await referencedSecret(ctx, ns, c.spec.secretRef.name);
  const secret = secretObj && secretValue(secretObj, c.spec.secretRef.key);
  // every missing reference is named (the reason is the first one's)
  const problem = notReadyAll(
    missingClientReferences(
      c,
      (id) => ctx.apiIds.has(ns, id),
      (p) => ctx.informers.policies.get(ns, p) !== undefined,
      secretObj,
    ),
  );

  if (!ctx.redis)
    return void (await report(
      ctx,
      REFS.OAuthClient,
      inf,
      raw,
      problem ?? notReady('StoreUnavailable', 'the controller runs without --redis'),
    ));
  try {
    if (problem) {
      for (const k of new Set([previous, recordKey])) if (k) await removeRecord(ctx, k);
      return void (await report(ctx, REFS.OAuthClient, inf, raw, problem));
    }
    const json = JSON.stringify(clientRecordOf(c, secret!));
    if ((await storeCall(ctx.redis.get(recordKey))) !== json) {
      await storeCall(ctx.redis.multi().set(recordKey, json).publish(CLIENT_CHANNEL, recordKey).exec());
      ctx.metrics.writes.inc({ target: 'client' });
    }
    if (previous && previous !== recordKey) await removeRecord(ctx, previous);
  } catch (e) {
    if (!(e instanceof StoreUnavailable)) throw e;
    await report(
      ctx,
      REFS.OAuthClient,
      inf,
      raw,
      notReady('StoreUnavailable', `Redis: ${e.message}`, previous ? { recordKey: previous } : undefined),
    );
    throw e;
  }
  await report(ctx, REFS.OAuthClient, inf, raw, ok('client record stored', { recordKey }));
}
