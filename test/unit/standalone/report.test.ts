/**
 * Standalone's per-resource log lines: the resource's fields never repeat a key the logger itself
 * writes (pino's `name` is the component), so each line is one JSON object with unique keys.
 */
import { pino } from 'pino';
import { ChangedNotesLog, noteOn } from '../../../standalone/report.js';
import { emptySnapshot } from '../../../compiler/snapshot.js';
import { validateDocument } from '../../../standalone/manifests.js';

test('a note about a resource names it as `resource`, not a second `name` key', async () => {
  const lines: string[] = [];
  const logger = pino({ name: 'standalone', level: 'info' }, { write: (l: string) => void lines.push(l) });
  const v = validateDocument({
    apiVersion: 'gw.io/v1alpha1',
    kind: 'Policy',
    metadata: { name: 'dup2' },
    spec: { rate: 1, per: 1 },
  });
  if (!v.ok) throw new Error(v.message);
  await new ChangedNotesLog(logger).log(new Map([['x', noteOn(emptySnapshot(), v.resource, 'is a duplicate')]]));
  expect(lines).toHaveLength(1);
  expect(lines[0]!.match(/"name":/g)).toHaveLength(1);
  const o = JSON.parse(lines[0]!) as Record<string, unknown>;
  expect(o).toMatchObject({ name: 'standalone', resource: 'dup2', kind: 'Policy', namespace: 'default' });
});
