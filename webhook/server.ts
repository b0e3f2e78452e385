/**
 * The mutating admission webhook's HTTPS server: `POST /mutate` (AdmissionReview v1 for Pods),
 * `/healthz`, `/readyz`, `/metrics`. Never blocks a pod it cannot understand: anything but a
 * malformed AdmissionReview is answered `allowed: true` (with a warning when nothing was injected).
 */
import { JsonTooDeepError, parseJson } from '../lib/json-depth.js';
import type { Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Counter, Registry, collectDefaultMetrics } from 'prom-client';
import type { Logger } from '../lib/logger.js';
import { handleOps, json } from '../lib/ops-server.js';
import { registerBuildInfo } from '../lib/build-info-metric.js';
import {
  AdmissionReviewSchema,
  PodSchema,
  admissionResponse,
  describeZodError,
  type AdmissionResponseBody,
} from './admission.js';
import { injectSidecar, type InjectOptions } from './inject.js';
const { createServer } = process.getBuiltinModule('node:https');
const { readFileSync, statSync } = process.getBuiltinModule('node:fs');

const MAX_BODY = 8 * 1024 * 1024;

export interface WebhookServerOptions {
  certFile: string;
  keyFile: string;
  inject: InjectOptions;
  logger: Logger;
  /** How often to look for a rotated certificate (ms); 0 disables. */
  reloadMs?: number;
  /** GET /readyz answers 503 while this returns false (default: always ready). */
  ready?: () => boolean;
}

/** Handles one AdmissionReview body; exported for the unit tests. */
export function review(
  body: unknown,
  inject: InjectOptions,
  logger?: Logger,
): { status: number; body: AdmissionResponseBody | { error: string } } {
  const parsed = AdmissionReviewSchema.safeParse(body);
  if (!parsed.success)
    return { status: 400, body: { error: `bad AdmissionReview: ${describeZodError(parsed.error)}` } };
  const req = parsed.data.request;
  // Only creation: a running pod's containers are immutable, so an UPDATE is never patched.
  if (req.kind.kind !== 'Pod' || req.kind.group !== '' || req.operation !== 'CREATE') {
    return { status: 200, body: admissionResponse(req.uid, undefined, []) };
  }
  const pod = PodSchema.safeParse(req.object);
  if (!pod.success) {
    logger?.warn(
      { uid: req.uid, namespace: req.namespace },
      `pod not understood, admitted unchanged: ${describeZodError(pod.error)}`,
    );
    return {
      status: 200,
      body: admissionResponse(req.uid, undefined, [
        `gw sidecar not injected: pod not understood (${describeZodError(pod.error)})`,
      ]),
    };
  }
  const r = injectSidecar(pod.data, inject, req.namespace);
  const name = pod.data.metadata?.name ?? `${pod.data.metadata?.generateName ?? ''}*`;
  logger?.info(
    { uid: req.uid, namespace: req.namespace, pod: name, outcome: r.outcome, dryRun: req.dryRun ?? false },
    'admission',
  );
  return { status: 200, body: admissionResponse(req.uid, r.patch, r.warnings) };
}

export function createWebhookServer(o: WebhookServerOptions): { server: Server; close: () => void } {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  registerBuildInfo(registry);
  const admissions = new Counter({
    name: 'gw_webhook_admissions_total',
    help: 'Pod admissions by outcome',
    labelNames: ['outcome'],
    registers: [registry],
  });
  const tls = () => ({ cert: readFileSync(o.certFile), key: readFileSync(o.keyFile) });
  const mtime = () => `${statSync(o.certFile).mtimeMs}:${statSync(o.keyFile).mtimeMs}`;
  let stamp = mtime();
  const server = createServer({ ...tls(), minVersion: 'TLSv1.2' }, (req: IncomingMessage, res: ServerResponse) => {
    if (handleOps(req, res, registry, o.ready ?? (() => true))) return;
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/mutate') return json(res, 404, { error: 'Not Found' });
    if (req.method !== 'POST') return json(res, 405, { error: 'Method Not Allowed' });
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (d: Buffer) => {
      size += d.length;
      if (size > MAX_BODY) {
        json(res, 413, { error: 'AdmissionReview too large' });
        req.destroy();
      } else chunks.push(d);
    });
    req.on('end', () => {
      if (res.headersSent) return;
      let body: unknown;
      try {
        body = parseJson(Buffer.concat(chunks));
      } catch (e) {
        admissions.inc({ outcome: 'bad-request' });
        return json(res, 400, { error: e instanceof JsonTooDeepError ? `body ${e.message}` : 'body is not JSON' });
      }
      const r = review(body, o.inject, o.logger);
      const outcome = 'response' in r.body ? (r.body.response.patch ? 'injected' : 'unchanged') : 'bad-request';
      admissions.inc({ outcome });
      json(res, r.status, r.body);
    });
  });
  // A rotated certificate (Secret updated, kubelet refreshed the files) is picked up without a restart.
  const timer = o.reloadMs
    ? setInterval(() => {
        try {
          const now = mtime();
          if (now === stamp) return;
          server.setSecureContext({ ...tls(), minVersion: 'TLSv1.2' });
          stamp = now;
          o.logger.info('TLS certificate reloaded');
        } catch (e) {
          o.logger.warn({ err: (e as Error).message }, 'TLS certificate reload failed; keeping the current one');
        }
      }, o.reloadMs)
    : undefined;
  timer?.unref();
  return { server, close: () => timer && clearInterval(timer) };
}
