/**
 * The controller's reconciles as spans (docs/contract.md#observability): `gw controller` with OTEL_EXPORTER_OTLP_ENDPOINT
 * exports one span per reconcile, named by kind, with the namespace and resource.
 */
import { freshNamespace } from '../../helpers/kube.js';
import { startOtlpReceiver, type OtlpReceiver } from '../../helpers/otlp-receiver.js';
import { apiDef, apply, startController, type Controller } from '../operator/helpers.js';

describe('gw controller reconciles as spans', () => {
  let rx: OtlpReceiver;
  let ctl: Controller | undefined;
  afterAll(async () => {
    await ctl?.stop();
    await rx?.close();
  });

  test('an ApiDefinition applied → a "reconcile Config" span of its namespace reaches the collector', async () => {
    rx = await startOtlpReceiver();
    const ns = await freshNamespace('otel-ctl');
    ctl = await startController(ns, [], { env: { OTEL_EXPORTER_OTLP_ENDPOINT: rx.url } });
    await apply(
      ns,
      apiDef('traced', { use_keyless: true, proxy: { listen_path: '/traced/', target_url: 'http://up:80' } }),
    );
    const span = await rx.waitFor(
      (s) => s.name === 'reconcile Config' && s.attributes['k8s.namespace.name'] === ns,
      15_000,
      'reconcile span',
    );
    expect(span.service).toBe('gw-controller');
    expect(span.attributes['gw.kind']).toBe('Config');
    expect(span.parentSpanId).toBe('');
  });
});
