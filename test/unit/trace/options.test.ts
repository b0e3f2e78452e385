/** The `opentelemetry` and `access_logs` options (docs/contract.md#gateway-configuration): defaults, bounds, clear errors. */
import { GatewayOptions, loadGatewayOptions } from '../../../lib/options.js';
import { otlpEndpoint } from '../../../lib/trace/setup.js';
const { mkdtempSync, writeFileSync } = process.getBuiltinModule('node:fs');
const { join } = process.getBuiltinModule('node:path');
const { tmpdir } = process.getBuiltinModule('node:os');

test('both are off by default; sampling_ratio defaults to 1.0', () => {
  const o = GatewayOptions.parse({});
  expect(o.opentelemetry).toEqual({ enabled: false, sampling_ratio: 1 });
  expect(o.access_logs).toEqual({ enabled: false });
  expect(GatewayOptions.parse({ opentelemetry: { enabled: true } }).opentelemetry.sampling_ratio).toBe(1);
});

test('endpoint: the option, else OTEL_EXPORTER_OTLP_ENDPOINT, else a local collector', () => {
  const given = GatewayOptions.parse({ opentelemetry: { enabled: true, endpoint: 'http://otel:4318' } });
  expect(otlpEndpoint(given, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318' })).toBe('http://otel:4318');
  const none = GatewayOptions.parse({ opentelemetry: { enabled: true } });
  expect(otlpEndpoint(none, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318' })).toBe('http://env:4318');
  expect(otlpEndpoint(none, {})).toBe('http://localhost:4318');
});

test.each([
  [{ opentelemetry: { enabled: true, sampling_ratio: 1.5 } }, 'opentelemetry.sampling_ratio'],
  [{ opentelemetry: { enabled: true, sampling_ratio: -0.1 } }, 'opentelemetry.sampling_ratio'],
  [{ opentelemetry: { enabled: true, endpoint: 'collector:4318' } }, 'opentelemetry.endpoint'],
  [{ opentelemetry: { enabled: true, endpoint: 'ftp://collector' } }, 'opentelemetry.endpoint'],
  [{ opentelemetry: { enabled: 'yes' } }, 'opentelemetry.enabled'],
  [{ opentelemetry: { enabled: true, sampling: 0.1 } }, 'opentelemetry'],
  [{ access_logs: { enabled: true, format: 'text' } }, 'access_logs'],
  [{ access_logs: true }, 'access_logs'],
])('%j is refused naming %s', (raw, field) => {
  const dir = mkdtempSync(join(tmpdir(), 'gw-opt-'));
  const file = join(dir, 'config.yaml');
  writeFileSync(file, JSON.stringify(raw));
  expect(() => loadGatewayOptions(file, {})).toThrow(new RegExp(`config\\.yaml: .*${field.replace('.', '\\.')}`));
});
