/**
 * A raw `#` in the request target (a request line no client library sends) → 400 in `gw standalone` and
 * `gw sidecar`, whatever strict_paths says: after `/epl/users` reached its endpoint limit, `/epl/users#x`
 * had been answered 200 and forwarded as `/users#x`, which upstream URL parsers serve as `/users`.
 */
import { connect } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { cleanup, startStandalone, tempDir } from '../../helpers/standalone.js';
import { freshNamespace } from '../../helpers/kube.js';
import { configOf, startSidecar, writeConfigMap } from '../../helpers/sidecar.js';

/** One request line as given, on a fresh socket; the status code of the answer. */
function rawStatus(base: string, line: string): Promise<number> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const s = connect(Number(u.port), u.hostname, () => s.write(`${line}\r\nHost: x\r\nConnection: close\r\n\r\n`));
    let got = '';
    s.on('data', (d: Buffer) => (got += d.toString('latin1')));
    s.on('end', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? 0)));
    s.on('error', reject);
  });
}

describe('a fragment in the request target', () => {
  test('standalone: 400 once the endpoint limit is reached and before; the plain path is limited as before', async () => {
    const echo = await startEcho(0);
    const dir = tempDir('gw-fragment-');
    writeFileSync(
      join(dir, 'epl.yaml'),
      `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: epl}
spec:
  use_keyless: true
  proxy: {listen_path: /epl/, target_url: '${echo.url}'}
  use_extended_paths: true
  extended_paths:
    rate_limit: [{path: /users, method: GET, rate: 2, per: 60}]
`,
    );
    const gw = await startStandalone(dir);
    try {
      const plain = [];
      for (let i = 0; i < 3; i++) plain.push(await rawStatus(gw.gateway, 'GET /epl/users HTTP/1.1'));
      expect(plain).toEqual([200, 200, 429]);
      expect(await rawStatus(gw.gateway, 'GET /epl/users#x HTTP/1.1')).toBe(400);
      expect(await rawStatus(gw.gateway, 'GET /epl/other#x HTTP/1.1')).toBe(400);
      expect(await rawStatus(gw.gateway, 'GET /epl/other?q=1#x HTTP/1.1')).toBe(400);
      expect(await rawStatus(gw.gateway, 'GET /epl/other?q=%23 HTTP/1.1')).toBe(200); // an encoded # is data
    } finally {
      await gw.stop();
      cleanup(dir);
      await new Promise((r) => echo.server.close(r));
    }
  });

  test('sidecar: 400', async () => {
    const echo = await startEcho(0);
    const ns = await freshNamespace('fragment');
    await writeConfigMap(ns, configOf(ns, [{ name: 'app', path: '/', rate: 100, per: 60 }]));
    const sc = await startSidecar({ ns, upstream: echo.url });
    try {
      expect(await rawStatus(sc.gw, 'GET /users HTTP/1.1')).toBe(200);
      expect(await rawStatus(sc.gw, 'GET /users#x HTTP/1.1')).toBe(400);
    } finally {
      await sc.stop();
      await new Promise((r) => echo.server.close(r));
    }
  });
});
