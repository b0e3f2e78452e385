/**
 * A keyless stream intake in a real `gw standalone`: the `events` ApiDefinition at /events/ whose
 * `streaming` section the test gives, started on a new directory, and POSTs of JSON to its `/in` input.
 * Used by test/integration/gateway-streams.test.ts.
 */
import { writeFileSync } from 'node:fs';
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
export async function postEvent(gw: Standalone, body: string | Buffer): Promise<number> {
  const r = await request(`${gw.gateway}/events/in`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json' },
  });
  await r.body.dump();
  return r.statusCode;
}
