/** Span export as the gateway configuration file asks for it (`opentelemetry`), for every gw process. */
import type { Logger } from '../logger.js';
import type { GatewayOptionsT } from '../options.js';
import type { Tracing } from './otel.js';

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
