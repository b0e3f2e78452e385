/**
 * An HTTP/2 connection whose session is over on the gateway's side while the client keeps its socket open
 * (docs/proxy.md, "Slow clients and connection caps"): a client that resets its stream once the answer's
 * head came and closes its session, without closing its socket. The gateway's side used to wait for the
 * client's FIN for good (FIN-WAIT-2), holding a file descriptor and a connection slot and keeping SIGTERM's
 * drain from ever ending; it is destroyed a second later, and the gateway exits on SIGTERM.
 */
import { connect as h2connect } from 'node:http2';
import { createServer, type Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';

const { execFileSync } = process.getBuiltinModule('node:child_process');

/**
 * TCP states of the gateway's side of its connection from the client's `clientPort` while the gateway
 * process `pid` still holds it (ss, iproute2; a socket it let go may stay in FIN-WAIT-2, the kernel's).
 */
function gatewaySideStates(port: number, clientPort: number, pid: number): string[] {
  const out = execFileSync('ss', ['-Htanp', `( sport = :${port} and dport = :${clientPort} )`], {
    encoding: 'utf8',
  });
  return out
    .split('\n')
    .filter((l) => l.includes(`pid=${pid},`))
    .map((l) => l.trim().split(/\s+/)[0] ?? '');
}

describe('HTTP/2: a session over on the gateway side while the client keeps its socket', () => {
  let slow: Server;
  let gw: Standalone | undefined;
  let dir: string;

  beforeAll(async () => {
    // an upstream that sends its head at once and its body 2 s later
    slow = createServer((req, res) => {
      req.resume();
      res.writeHead(200);
      res.write('part');
      setTimeout(() => res.end('late'), 2000).unref();
    });
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    dir = tempDir();
    writeFileSync(
      join(dir, 'r.yaml'),
      `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: slow}
spec:
  use_keyless: true
  proxy: {listen_path: /slow/, target_url: 'http://127.0.0.1:${(slow.address() as { port: number }).port}'}
`,
    );
    gw = await startStandalone(dir);
  }, 30_000);

  afterAll(async () => {
    if (gw && gw.proc.exitCode === null) gw.proc.kill('SIGKILL');
    slow.closeAllConnections();
    slow.close();
    if (dir) cleanup(dir);
  });

  test('its socket is destroyed, and SIGTERM ends the gateway', async () => {
    const g = gw!;
    const port = Number(new URL(g.gateway).port);
    const s = h2connect(g.gateway);
    s.on('error', () => undefined);
    const r = s.request({ ':path': '/slow/a' });
    r.on('error', () => undefined);
    await new Promise((res) => r.once('response', res));
    const clientPort = s.socket.localPort!;
    r.close();
    s.close(); // the client's socket stays open (nothing destroys it on this side)
    const end = Date.now() + 10_000;
    let states = gatewaySideStates(port, clientPort, g.proc.pid!);
    expect(states.length).toBe(1); // the connection, seen from the gateway
    while (states.length > 0 && Date.now() < end) {
      await new Promise((res) => setTimeout(res, 200));
      states = gatewaySideStates(port, clientPort, g.proc.pid!);
    }
    // the old code held its side in FIN-WAIT-2 for as long as the client kept its socket
    expect(states).toEqual([]);
    const exited = new Promise<number | null>((res) => g.proc.once('exit', (code) => res(code)));
    g.proc.kill('SIGTERM');
    const code = await Promise.race([exited, new Promise<string>((res) => setTimeout(() => res('hung'), 15_000))]);
    expect(code).toBe(0);
    s.destroy();
  }, 40_000);
});
