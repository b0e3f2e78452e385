/**
 * A refused resource is told (docs/operator.md): the controller logs at warn and records a Warning Event when
 * an ApiDefinition is refused for a listen path another one serves, and logs at warn and records an
 * `Accepted` Event when that refused one starts serving once the serving one is deleted (it takes the
 * traffic with its own target and limit). Real kube-apiserver, real `gw controller`.
 */
import { jest } from '@jest/globals';
import { freshNamespace, kubectl } from '../../helpers/kube.js';
import { apiDef, apply, eventsOn, eventually, startController, waitReady, type Controller } from './helpers.js';

jest.setTimeout(60_000);

describe('gw controller: refused resources and their takeover are told', () => {
  let ns: string;
  let ctl: Controller;

  beforeAll(async () => {
    ns = await freshNamespace('refused');
    ctl = await startController(ns, ['--resync-period', '3']);
  });
  afterAll(async () => {
    await ctl?.stop();
  });

  /** The controller's log lines at warn (pino level 40) with this message. */
  const warnLines = (msg: string): Record<string, unknown>[] =>
    ctl
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.level === 40 && l.msg === msg);

  test('a duplicate listen path: Warning Event + warn line; the serving one deleted: Accepted Event + warn line', async () => {
    await apply(ns, apiDef('first', { proxy: { listen_path: '/dup/', target_url: 'http://127.0.0.1:1' } }));
    await waitReady(ns, 'apidefinition', 'first', 'True', 'Reconciled');
    await apply(ns, apiDef('second', { proxy: { listen_path: '/dup/', target_url: 'http://127.0.0.1:2' } }));
    await waitReady(ns, 'apidefinition', 'second', 'False', 'InvalidSpec');

    const refused = await eventually(
      async () => {
        const e = (await eventsOn(ns, 'second')).find((x) => x.type === 'Warning');
        return e && warnLines('resource refused').some((l) => l.name === 'second') ? e : undefined;
      },
      10_000,
      'a Warning Event and a warn line for the refused duplicate',
    );
    expect(refused.message).toMatch(/conflicts with ApiDefinition .*\/first/);
    const line = warnLines('resource refused').find((l) => l.name === 'second')!;
    expect(line).toMatchObject({ kind: 'ApiDefinition', namespace: ns, name: 'second' });

    const r = await kubectl(['delete', '-n', ns, 'apidefinition', 'first']);
    expect(r.code).toBe(0);
    await waitReady(ns, 'apidefinition', 'second', 'True', 'Reconciled');
    const accepted = await eventually(
      async () => {
        const e = (await eventsOn(ns, 'second')).find((x) => x.reason === 'Accepted');
        return e && warnLines('resource refused until now is Ready').some((l) => l.name === 'second') ? e : undefined;
      },
      10_000,
      'an Accepted Event and a warn line once the refused duplicate serves',
    );
    expect(accepted.type).toBe('Normal');
    expect(accepted.message).toMatch(/refused until now: InvalidSpec/);
  });
});
