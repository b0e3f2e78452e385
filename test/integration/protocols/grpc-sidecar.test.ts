/**
 * gRPC through `gw sidecar` (docs/proxy.md, "gRPC", "Upstream TLS"), against the run's kube-apiserver:
 * a grpc-js client over TLS (ALPN h2) to the sidecar's TLS listener, the sidecar to a grpc-js server over
 * TLS with a private CA named by the API's proxy.transport; a per-method limit answering
 * RESOURCE_EXHAUSTED; an API without the CA finds the upstream unverifiable: UNAVAILABLE, logged.
 */
import * as grpc from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { ApiDefinitionResource } from '../../../crds/kinds.js';
import { compileConfig } from '../../../compiler/compile-config.js';
import { freshNamespace } from '../../helpers/kube.js';
import { eventually, startSidecar, writeConfigMap, type Sidecar } from '../../helpers/sidecar.js';
import { issue, makeCa } from '../../helpers/certs.js';
import { cleanup, tempDir } from '../../helpers/standalone.js';
import { bufferMethod, pass } from '../../helpers/grpc.js';

const SERVICE = {
  Unary: bufferMethod('/test.Echo/Unary'),
  Limited: bufferMethod('/test.Echo/Limited'),
} satisfies grpc.ServiceDefinition;
const OTHER = { Unary: bufferMethod('/other.Svc/Unary') } satisfies grpc.ServiceDefinition;

describe('gRPC through gw sidecar: TLS both ways', () => {
  let certs: string;
  let upstream: grpc.Server;
  let sc: Sidecar;
  let client: grpc.Client;

  beforeAll(async () => {
    certs = tempDir('gw-certs-');
    const ca = makeCa(certs, 'ca');
    const gwCert = issue(certs, 'ca', 'gw', 'localhost');
    const upCert = issue(certs, 'ca', 'upstream', 'upstream.internal', 'DNS:upstream.internal');
    upstream = new grpc.Server();
    const answer = (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>): void =>
      cb(null, Buffer.concat([Buffer.from('tls:'), call.request]));
    upstream.addService(SERVICE, { Unary: answer, Limited: answer });
    upstream.addService(OTHER, { Unary: answer });
    const port = await new Promise<number>((resolve, reject) =>
      upstream.bindAsync(
        '127.0.0.1:0',
        grpc.ServerCredentials.createSsl(null, [
          { cert_chain: readFileSync(upCert.cert), private_key: readFileSync(upCert.key) },
        ]),
        (e, p) => (e ? reject(e) : resolve(p)),
      ),
    );
    const ns = await freshNamespace('grpc');
    const api = (
      name: string,
      listen: string,
      spec: Record<string, unknown>,
    ): ReturnType<typeof ApiDefinitionResource.parse> =>
      ApiDefinitionResource.parse({
        apiVersion: 'gw.io/v1alpha1',
        kind: 'ApiDefinition',
        metadata: { name, namespace: ns },
        spec: { use_keyless: true, ...spec, proxy: { listen_path: listen, ...(spec.proxy as object) } },
      });
    const defs = [
      api('echo', '/test.Echo/', {
        proxy: { transport: { ssl_ca_cert_file: ca.cert, ssl_server_name: 'upstream.internal' } },
        use_extended_paths: true,
        extended_paths: { rate_limit: [{ method: 'POST', path: '/test.Echo/Limited', rate: 1, per: 60 }] },
      }),
      api('other', '/other.Svc/', {}),
    ];
    await writeConfigMap(ns, JSON.stringify(compileConfig(defs, []).config));
    sc = await startSidecar({
      ns,
      upstream: `https://127.0.0.1:${port}`,
      options: `tls: {cert_file: ${gwCert.cert}, key_file: ${gwCert.key}}\n`,
    });
    client = new grpc.Client(new URL(sc.gw).host, grpc.credentials.createSsl(readFileSync(ca.cert)));
  }, 40_000);

  afterAll(async () => {
    client?.close();
    await sc?.stop();
    upstream?.forceShutdown();
    if (certs) cleanup(certs);
  });

  const call = (path: string, body: string): Promise<{ value?: Buffer; err?: grpc.ServiceError }> =>
    new Promise((resolve) =>
      client.makeUnaryRequest(path, pass, pass, Buffer.from(body), new grpc.Metadata(), {}, (err, value) =>
        resolve({ value: value ?? undefined, err: err ?? undefined }),
      ),
    );

  test('unary over TLS to the sidecar and over TLS (private CA, SNI name) to the upstream', async () => {
    const r = await call('/test.Echo/Unary', 'hi');
    expect(r.err).toBeUndefined();
    expect(r.value?.toString()).toBe('tls:hi');
  });

  test('a per-method limit: RESOURCE_EXHAUSTED with retry-after; the other method passes', async () => {
    expect((await call('/test.Echo/Limited', 'a')).err).toBeUndefined();
    const over = await call('/test.Echo/Limited', 'b');
    expect(over.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(over.err?.metadata.get('retry-after')[0]).toBeDefined();
    expect((await call('/test.Echo/Unary', 'c')).err).toBeUndefined();
  });

  test('an upstream certificate that does not verify (no CA for that API): UNAVAILABLE, logged', async () => {
    const r = await call('/other.Svc/Unary', 'x');
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    await eventually(async () => sc.out().includes('upstream call failed'), 3000, 'the upstream failure logged');
    expect(sc.out()).toMatch(/"api":"[^"]*other[^"]*"[^\n]*upstream call failed/);
  });
});
