/** `gw standalone --redis`: /readyz follows the store (503 while Redis is down, 200 when it is back). */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { startEcho } from '../../scripts/echo-upstream.js';
import { startNode, stopNode, type Node } from '../harness/redis-cluster.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';
import { eventually } from '../helpers/sidecar.js';

async function code(url: string): Promise<number> {
  const r = await request(url);
  await r.body.dump();
  return r.statusCode;
}

describe('gw standalone with --redis', () => {
  let node: Node;
  let gw: Standalone;
  let dir: string;
  let echo: Awaited<ReturnType<typeof startEcho>>;
  beforeAll(async () => {
    node = await startNode();
    echo = await startEcho();
    dir = tempDir();
    writeFileSync(join(dir, 'a.yaml'), `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: a}\nspec:\n  use_keyless: true\n  proxy: {listen_path: /a/, target_url: '${echo.url}'}\n`);
    gw = await startStandalone(dir, ['--redis', `redis://127.0.0.1:${node.port}`]);
  }, 30_000);
  afterAll(async () => {
    await gw?.stop();
    echo?.server.close();
    if (node) await stopNode(node);
    if (dir) cleanup(dir);
  });

  test('/readyz is 503 while the store is unreachable and 200 again when it returns; /healthz stays 200', async () => {
    expect(await code(`${gw.admin}/readyz`)).toBe(200);
    expect(await code(`${gw.gateway}/readyz`)).toBe(200);
    await stopNode(node, true);
    await eventually(async () => (await code(`${gw.admin}/readyz`)) === 503, 5000, 'admin not ready');
    expect(await code(`${gw.gateway}/readyz`)).toBe(503);
    expect(await code(`${gw.admin}/healthz`)).toBe(200);
    expect(await code(`${gw.gateway}/a/x`)).toBe(200); // traffic keeps flowing
    node = await startNode([], node.port, node.dir);
    await eventually(async () => (await code(`${gw.admin}/readyz`)) === 200, 15_000, 'ready again');
    expect(await code(`${gw.gateway}/readyz`)).toBe(200);
  }, 30_000);
});
