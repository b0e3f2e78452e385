/**
 * A keyless stream intake in a real `gw standalone`: the `events` ApiDefinition at /events/ whose
 * `streaming` section the test gives, started on a new directory, and POSTs of JSON to its `/in` input.
 * Used by test/integration/gateway-streams.test.ts.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { request } from 'undici';
import { startStandalone, tempDir, type Standalone, type StartOptions } from './standalone.js';

/** A keyless classic ApiDefinition `name` at /name/ proxying to target; `spec`: more spec lines, indented by two. */
export const keylessApiYaml = (name: string, target: string, spec = ''): string => `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: ${name}}
spec:
  use_keyless: true
  proxy: {listen_path: /${name}/, target_url: '${target}'}
${spec}`;

/**
 * `gw standalone` on a new directory whose events.yaml is the `events` API (keyless, proxying to target)
 * with `spec` (its `streaming` section and anything else), then `more` documents.
 */
export async function startStreamIntake(
  target: string,
  spec: string,
  o: { more?: string; start?: StartOptions } = {},
): Promise<{ gw: Standalone; dir: string }> {
  const dir = tempDir('gw-stream-intake-');
  writeFileSync(join(dir, 'events.yaml'), keylessApiYaml('events', target, spec) + (o.more ? `---\n${o.more}` : ''));
  return { gw: await startStandalone(dir, [], {}, o.start ?? {}), dir };
}

/** A POST of body (JSON) to the intake: its status, the answer read to its end. */
export const postEvent = (gw: Standalone, body: string | Buffer): Promise<number> => postEventAt(gw.gateway, body);

/** postEvent to the intake of the gateway listening at `gateway` (a URL). */
async function postEventAt(gateway: string, body: string | Buffer): Promise<number> {
  const r = await request(`${gateway}/events/in`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json' },
  });
  await r.body.dump();
  return r.statusCode;
}

/**
 * The status of a refusal whose connection was cut before its answer was read. A body refused before it
 * is read is answered, then its connection closed after a lingering read (as nginx does): a client still
 * writing 1 MB may see the connection cut (EPIPE, ECONNRESET) before it reads the answer.
 */
export const CUT = 0;

const wasCut = (e: unknown): boolean => {
  const err = e as { code?: string; cause?: { code?: string } };
  return ['EPIPE', 'ECONNRESET', 'UND_ERR_SOCKET'].some((c) => err.code === c || err.cause?.code === c);
};

/** postEvent to a gateway at `gateway`, CUT for a refusal whose connection was cut first. */
export const postEventTo = (gateway: string, body: string | Buffer): Promise<number> =>
  postEventAt(gateway, body).catch((e: unknown) => {
    if (wasCut(e)) return CUT;
    throw e;
  });

const ATTACKER = fileURLToPath(new URL('./intake-attacker.js', import.meta.url));

/**
 * An attack on the intake from a process of its own (test/helpers/intake-attacker.ts): `count` 1 MB
 * bodies at `rate` per second, every `deepEvery`-th one nested 500,000 deep. resolved once the process has
 * built its bodies (`flatBytes`: a flat body's size); `send()` starts the attack and resolves with the statuses (CUT for a cut).
 */
export async function attackIntake(
  gateway: string,
  plan: { rate: number; count: number; deepEvery: number },
): Promise<{ pid: number; flatBytes: number; send: () => Promise<{ flat: number[]; deep: number[] }> }> {
  const child = spawn(
    process.execPath,
    [ATTACKER, gateway, String(plan.rate), String(plan.count), String(plan.deepEvery)],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout! });
  const next = () =>
    new Promise<string>((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`intake attacker exited ${code}`));
      child.once('exit', onExit);
      lines.once('line', (l) => {
        child.off('exit', onExit);
        resolve(l);
      });
    });
  const ready = /^ready (\d+)$/.exec(await next());
  if (!ready) throw new Error('intake attacker: no ready line');
  return {
    pid: child.pid!,
    flatBytes: Number(ready[1]),
    send: async () => {
      const done = next();
      child.stdin!.write('go\n');
      const out = JSON.parse(await done) as { flat: number[]; deep: number[] };
      child.stdin!.end();
      return out;
    },
  };
}
