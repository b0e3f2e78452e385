/** The standalone directory of `make bench-scale` (scale.ts, standalone-startup.ts). */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sha256hex } from '../../lib/hash.js';

/** One keyless API per file, `/api-<i>/`. */
export const scaleApiYaml = (i: number, target: string, listen = `/api-${i}/`): string =>
  `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: api-${i}}\nspec:\n  api_id: api-${i}\n  use_keyless: true\n  proxy: {listen_path: ${listen}, target_url: '${target}'}\n`;

/** `apis` one-API files and `keys` AccessKeys (key_hash, 1,000 per file) into dir. */
export function writeScaleFixture(dir: string, apis: number, keys: number, target = 'http://127.0.0.1:9'): void {
  for (let i = 0; i < apis; i++) writeFileSync(join(dir, `api-${i}.yaml`), scaleApiYaml(i, target));
  for (let f = 0; f < keys / 1000; f++) {
    const docs: string[] = [];
    for (let k = f * 1000; k < (f + 1) * 1000 && k < keys; k++)
      docs.push(
        `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: k-${k}}\nspec: {key_hash: ${sha256hex(`bench-${k}`)}, rate: 100, per: 1}\n`,
      );
    writeFileSync(join(dir, `keys-${f}.yaml`), docs.join('---\n'));
  }
}
