/** `gw webhook`: the mutating admission webhook that injects `gw sidecar` into annotated pods. */
import { z } from 'zod';
import { createLogger } from '../lib/logger.js';
import { drain, listen } from '../lib/serve.js';
import { createWebhookServer } from '../webhook/server.js';
import { SECRET_NAME, type InjectOptions } from '../webhook/inject.js';
import { onDrainNotice, onShutdown } from './shutdown.js';

export interface WebhookFlags {
  listen: string;
  tlsCert: string;
  tlsKey: string;
  image: string;
  imagePullPolicy: string;
  sidecarListenPort: string;
  sidecarMetricsPort: string;
  redisSecret: string;
  sidecarConfigMap?: string;
  sidecarConfigNamespaces?: string;
  sidecarCpuRequest: string;
  sidecarMemoryRequest: string;
  sidecarCpuLimit?: string;
  sidecarMemoryLimit: string;
  sidecarNodeOptions?: string;
  sidecarDrainDelay: string;
  sidecarTlsSecret?: string;
  sidecarTlsClientCa?: string;
  sidecarTlsMinVersion?: string;
  sidecarH2c?: string;
  runAsUser: string;
}

const portNum = (flag: string) =>
  z
    .string()
    .regex(/^\d+$/, `${flag}: not a number`)
    .transform(Number)
    .pipe(z.number().int().min(1, `${flag}: out of range`).max(65535, `${flag}: out of range`));
const quantity = (flag: string) =>
  z.string().regex(/^\d+(\.\d+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/, `${flag}: not a Kubernetes quantity`);

/** Flags → InjectOptions, or a one-line error naming the flag. */
export function injectOptionsFromFlags(f: WebhookFlags): InjectOptions {
  const schema = z.object({
    image: z.string().min(1, '--image: empty'),
    imagePullPolicy: z.enum(['Always', 'IfNotPresent', 'Never'], {
      message: '--image-pull-policy: Always, IfNotPresent or Never',
    }),
    listenPort: portNum('--sidecar-listen-port'),
    metricsPort: portNum('--sidecar-metrics-port'),
    redisSecretName: z.string(),
    configMapName: z.string().min(1).optional(),
    configNamespaces: z
      .string()
      .optional()
      .transform((v) =>
        v === undefined
          ? undefined
          : v
              .split(',')
              .map((n) => n.trim())
              .filter(Boolean),
      ),
    cpuRequest: quantity('--sidecar-cpu-request'),
    memoryRequest: quantity('--sidecar-memory-request'),
    cpuLimit: quantity('--sidecar-cpu-limit').optional(),
    memoryLimit: quantity('--sidecar-memory-limit'),
    drainDelaySeconds: z
      .string()
      .regex(/^\d+$/, '--sidecar-drain-delay: not a whole number of seconds')
      .transform(Number)
      .pipe(z.number().max(60, '--sidecar-drain-delay: at most 60 seconds')),
    tlsSecret: z
      .string()
      .trim()
      .refine((v) => v === '' || (v.length <= 253 && SECRET_NAME.test(v)), '--sidecar-tls-secret: not a Secret name')
      .optional(),
    tlsClientCa: z.enum(['true', 'false'], { message: '--sidecar-tls-client-ca: true or false' }),
    tlsMinVersion: z
      .enum(['TLSv1.2', 'TLSv1.3'], { message: '--sidecar-tls-min-version: TLSv1.2 or TLSv1.3' })
      .optional(),
    h2c: z.enum(['true', 'false'], { message: '--sidecar-h2c: true or false' }).optional(),
    runAsUser: z
      .string()
      .regex(/^\d+$/, '--run-as-user: not a number')
      .transform(Number)
      .refine((n) => n > 0, '--run-as-user: 0 (root) is refused: the injected sidecar runs as a non-root user'),
  });
  const r = schema.safeParse({
    image: f.image,
    imagePullPolicy: f.imagePullPolicy,
    listenPort: f.sidecarListenPort,
    metricsPort: f.sidecarMetricsPort,
    redisSecretName: f.redisSecret,
    configMapName: f.sidecarConfigMap,
    configNamespaces: f.sidecarConfigNamespaces,
    cpuRequest: f.sidecarCpuRequest,
    memoryRequest: f.sidecarMemoryRequest,
    cpuLimit: f.sidecarCpuLimit,
    memoryLimit: f.sidecarMemoryLimit,
    drainDelaySeconds: f.sidecarDrainDelay,
    tlsSecret: f.sidecarTlsSecret,
    tlsClientCa: f.sidecarTlsClientCa ?? 'false',
    tlsMinVersion: f.sidecarTlsMinVersion || undefined,
    h2c: f.sidecarH2c || undefined,
    runAsUser: f.runAsUser,
  });
  if (!r.success) throw new Error(r.error.issues[0]?.message ?? 'bad flags');
  const v = r.data;
  if (v.listenPort === v.metricsPort) throw new Error('--sidecar-listen-port and --sidecar-metrics-port must differ');
  if (!v.tlsSecret && (v.tlsClientCa === 'true' || v.tlsMinVersion))
    throw new Error('--sidecar-tls-client-ca and --sidecar-tls-min-version need --sidecar-tls-secret');
  return {
    image: v.image,
    imagePullPolicy: v.imagePullPolicy,
    listenPort: v.listenPort,
    metricsPort: v.metricsPort,
    redisSecretName: v.redisSecretName || undefined,
    configMapName: v.configMapName,
    ...(v.configNamespaces ? { configNamespaces: v.configNamespaces } : {}),
    resources: {
      requests: { cpu: v.cpuRequest, memory: v.memoryRequest },
      limits: v.cpuLimit ? { cpu: v.cpuLimit, memory: v.memoryLimit } : { memory: v.memoryLimit },
    },
    runAsUser: v.runAsUser,
    drainDelaySeconds: v.drainDelaySeconds,
    ...(f.sidecarNodeOptions?.trim() ? { nodeOptions: f.sidecarNodeOptions.trim() } : {}),
    ...(v.tlsSecret
      ? {
          tls: {
            secretName: v.tlsSecret,
            clientCa: v.tlsClientCa === 'true',
            ...(v.tlsMinVersion ? { minVersion: v.tlsMinVersion } : {}),
          },
        }
      : {}),
    ...(v.h2c ? { h2c: v.h2c === 'true' } : {}),
  };
}

export async function runWebhook(flags: WebhookFlags): Promise<void> {
  const logger = createLogger('webhook');
  const inject = injectOptionsFromFlags(flags);
  let webhook: ReturnType<typeof createWebhookServer>;
  try {
    webhook = createWebhookServer({
      certFile: flags.tlsCert,
      keyFile: flags.tlsKey,
      inject,
      logger,
      reloadMs: 30_000,
      ready: () => !notice.isDraining(),
    });
  } catch (e) {
    throw new Error(`--tls-cert/--tls-key: cannot load: ${(e as Error).message}`, { cause: e });
  }
  // the preStop hook's notice (SIGUSR2), then SIGTERM's drain (docs/helm.md, "Termination")
  const notice = onDrainNotice(logger, [webhook.server]);
  const addr = await listen(webhook.server, flags.listen, '--listen');
  onShutdown(logger, async () => {
    webhook.close();
    await drain(webhook.server);
  });
  // announced only once SIGTERM drains: a supervisor may stop the process the moment it reads this
  logger.info({ listen: addr, image: inject.image }, 'gw webhook ready');
}
