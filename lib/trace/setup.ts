/** Span export as the gateway configuration file asks for it (`opentelemetry`), for every gw process. */
import type { Logger } from '../logger.js';
import type { GatewayOptionsT } from '../options.js';
import type { Tracing } from './otel.js';

/**
 * Span export for a process without a gateway configuration file (gw controller): on when the
 * OpenTelemetry SDKs' own variable OTEL_EXPORTER_OTLP_ENDPOINT is set (and OTEL_SDK_DISABLED is not
 * "true"), sampling ratio from OTEL_TRACES_SAMPLER_ARG (default 1).
 */
export async function tracingFromEnv(
  env: NodeJS.ProcessEnv,
  serviceName: string,
  logger: Logger,
  onExportFailure: () => void,
): Promise<Tracing | undefined> {
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!endpoint || env.OTEL_SDK_DISABLED === 'true') return undefined;
  if (!/^https?:\/\/[^/]/i.test(endpoint))
    throw new Error(
      `OTEL_EXPORTER_OTLP_ENDPOINT: must be an http:// or https:// URL (got ${JSON.stringify(endpoint)})`,
    );
  const arg = env.OTEL_TRACES_SAMPLER_ARG;
  const ratio = arg === undefined || arg === '' ? 1 : Number(arg);
  if (!(ratio >= 0 && ratio <= 1))
    throw new Error(`OTEL_TRACES_SAMPLER_ARG: must be a number from 0 to 1 (got ${JSON.stringify(arg)})`);
  const o = { opentelemetry: { enabled: true, endpoint, sampling_ratio: ratio } } as GatewayOptionsT;
  return tracingFromOptions(o, serviceName, logger, onExportFailure);
}

/** Where spans go when `opentelemetry.endpoint` is not given: the SDKs' variable, else a local collector. */
export function otlpEndpoint(o: GatewayOptionsT, env: NodeJS.ProcessEnv = process.env): string {
  return o.opentelemetry.endpoint ?? env.OTEL_EXPORTER_OTLP_ENDPOINT ?? 'http://localhost:4318';
}

/**
 * Starts span export when `opentelemetry.enabled` (the SDK is loaded only then); undefined otherwise.
 * A failed export is counted by `onExportFailure` and logged at most once a minute.
 */
export async function tracingFromOptions(
  o: GatewayOptionsT,
  serviceName: string,
  logger: Logger,
  onExportFailure: () => void,
): Promise<Tracing | undefined> {
  if (!o.opentelemetry.enabled) return undefined;
  const endpoint = otlpEndpoint(o);
  const { startTracing } = await import('./otel.js');
  const tracing = await startTracing({
    endpoint,
    samplingRatio: o.opentelemetry.sampling_ratio,
    serviceName,
    onExportFailure,
    logExportFailure: (err, suppressed) =>
      logger.warn(
        { endpoint, err: err.message, ...(suppressed ? { suppressed } : {}) },
        'span export to the OpenTelemetry collector failed (requests are not affected)',
      ),
  });
  logger.info({ endpoint, sampling_ratio: o.opentelemetry.sampling_ratio }, 'exporting spans over OTLP/HTTP');
  return tracing;
}
