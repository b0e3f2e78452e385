/**
 * gw standalone on a hostile resources directory (real process, real HTTP): symbolic-link loops, an
 * alias bomb, a FIFO, a huge file, an unreadable file or directory, a Secret without the named key and
 * conflicting files. The path at fault is refused with one line naming it; everything else loads, serves
 * and keeps reloading.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { request } from 'undici';
import { startEcho } from '../../scripts/echo-upstream.js';
import { run } from '../helpers/chart-tools.js';
import { eventually } from '../helpers/sidecar.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../helpers/standalone.js';
import { aliasBomb, apiYaml, writeRefusedManifests } from '../fixtures/refused-manifests.js';

async function status(url: string, headers: Record<string, string> = {}): Promise<number> {
  const r = await request(url, { headers });
  await r.body.dump();
  return r.statusCode;
}

/** The log lines (JSON or not) that contain every one of the given strings. */
const linesWith = (gw: Standalone, ...parts: string[]): string[] =>
  gw
    .output()
    .split('\n')
    .filter((l) => parts.every((p) => l.includes(p)));

const mkfifo = async (path: string): Promise<void> => {
  const r = await run('mkfifo', [path], { timeoutMs: 5000 });
  if (r.code !== 0) throw new Error(`mkfifo ${path}: ${r.stderr}`);
};

let echo: { server: Server; url: string };
beforeAll(async () => {
  echo = await startEcho();
});
afterAll(() => echo?.server.close());

describe('gw standalone: a hostile directory at start-up', () => {
  let gw: Standalone;
  let dir: string;

  beforeAll(async () => {
    dir = tempDir();
    writeFileSync(join(dir, 'good.yaml'), apiYaml('good', '/good/', echo.url));
    // symbolic-link loops: two files pointing at each other, a directory linking back to itself
    symlinkSync('lb.yaml', join(dir, 'la.yaml'));
    symlinkSync('la.yaml', join(dir, 'lb.yaml'));
    mkdirSync(join(dir, 'loopdir'));
    symlinkSync('../loopdir', join(dir, 'loopdir', 'self'));
    writeFileSync(join(dir, 'loopdir', 'inner.yaml'), apiYaml('inner', '/inner/', echo.url));
    // an alias bomb, a deeply nested file, a file over 1 MiB, conflicts, a Secret without the named key (test/fixtures/refused-manifests.ts)
    writeRefusedManifests(dir, echo.url);
    writeFileSync(join(dir, 'locked.yaml'), apiYaml('locked', '/locked/', echo.url));
    chmodSync(join(dir, 'locked.yaml'), 0o000);
    mkdirSync(join(dir, 'locked-dir'));
    writeFileSync(join(dir, 'locked-dir', 'hidden.yaml'), apiYaml('hidden', '/hidden/', echo.url));
    chmodSync(join(dir, 'locked-dir'), 0o000);
    await mkfifo(join(dir, 'pipe.yaml'));
    // a YAML 1.1 boolean: `active: off` is false, as kubectl sends it
    writeFileSync(join(dir, 'off.yaml'), `${apiYaml('inactive', '/inactive/', echo.url)}  active: off\n`);
    gw = await startStandalone(dir, [], { GW_LOG_LEVEL: 'info' }, { permissions: true });
  });
  afterAll(async () => {
    await gw?.stop();
    chmodSync(join(dir, 'locked-dir'), 0o700);
    cleanup(dir);
  });

  test('the good APIs serve and /readyz is 200; nothing failed as a whole', async () => {
    expect(await status(`${gw.gateway}/good/x`)).toBe(200);
    expect(await status(`${gw.gateway}/inner/x`)).toBe(200); // loopdir read once, by its real path
    expect(await status(`${gw.admin}/readyz`)).toBe(200);
    expect(gw.output()).not.toContain('applying resources failed');
    expect(gw.output()).not.toContain('cannot read resources directory');
  });

  test('a symbolic-link loop (files or a directory) is skipped with one warning naming it', () => {
    expect(linesWith(gw, 'la.yaml', 'symbolic link loop')).toHaveLength(1);
    expect(linesWith(gw, 'lb.yaml', 'symbolic link loop')).toHaveLength(1);
    expect(linesWith(gw, 'loopdir/self', 'symbolic link loop (leads back to loopdir)')).toHaveLength(1);
  });

  test('an alias bomb refuses only its file, with a line naming it', async () => {
    expect(linesWith(gw, 'resource refused: bomb.yaml (document 0): invalid YAML: Excessive alias count')).toHaveLength(
      1,
    );
  });

  test('a file nested 100,000 levels deep is refused before the parse, naming it and the rule; it is not served', async () => {
    expect(
      linesWith(gw, 'resource refused: deep.yaml: invalid YAML: nested deeper than 66 levels (document 0, line 5'),
    ).toHaveLength(1);
    expect(linesWith(gw, 'Maximum call stack')).toEqual([]);
    expect(await status(`${gw.gateway}/good/x`)).toBe(200);
  });

  test('a YAML 1.1 boolean (active: off) is read as kubectl reads it: the API is inactive (404), one line names the field', async () => {
    expect(
      linesWith(
        gw,
        'resource read with a warning: off.yaml (document 0): spec.active: off is read as false, as kubectl reads YAML (1.1',
      ),
    ).toHaveLength(1);
    expect(linesWith(gw, 'resource refused: off.yaml')).toEqual([]);
    expect(await status(`${gw.gateway}/inactive/x`)).toBe(404);
    expect(await status(`${gw.gateway}/good/x`)).toBe(200);
  });

  test('a FIFO named *.yaml is skipped with one warning (the start-up did not block on it)', () => {
    expect(linesWith(gw, 'resource refused: pipe.yaml: skipped: a FIFO, not a regular file')).toHaveLength(1);
  });

  test('a file over 1 MiB is refused naming it and the limit; it is not served', async () => {
    expect(linesWith(gw, 'resource refused: huge.yaml: too large:', 'over the limit of 1048576 bytes')).toHaveLength(1);
    expect(await status(`${gw.gateway}/huge/x`)).toBe(404);
    expect(linesWith(gw, 'huge.yaml', 'not loaded (it has no previous version to keep)')).toHaveLength(1);
    expect(linesWith(gw, 'huge.yaml', 'keeping its previous version')).toEqual([]);
  });

  test('an unreadable file or directory is refused naming it and why', async () => {
    expect(linesWith(gw, 'resource refused: locked.yaml: cannot read: EACCES: permission denied')).toHaveLength(1);
    expect(await status(`${gw.gateway}/locked/x`)).toBe(404);
    expect(linesWith(gw, 'resource refused: locked-dir: directory skipped: EACCES: permission denied')).toHaveLength(1);
    expect(await status(`${gw.gateway}/hidden/x`)).toBe(404);
  });

  test('a Secret without the named key: no Secret generated, one line naming the AccessKey, its file and the key; not served', async () => {
    expect(existsSync(join(dir, '.gw', 'secret-default-otherkey.yaml'))).toBe(false);
    expect(linesWith(gw, 'generated a random key', 'otherkey')).toEqual([]);
    expect(
      linesWith(
        gw,
        'AccessKey default/wrongkey (keys.yaml) not served: Secret default/otherkey (otherkey.yaml) has no key \\"key\\"',
      ),
    ).toHaveLength(1);
    expect(await status(`${gw.gateway}/keyed/x`, { authorization: 'not-the-key-0123456789' })).toBe(403);
  });

  test('a Secret that does not exist is still generated, and its key is served', async () => {
    const file = join(dir, '.gw', 'secret-default-absent.yaml');
    await eventually(async () => existsSync(file), 5000, 'generated Secret');
    const b64 = /key: (\S+)/.exec(readFileSync(file, 'utf8'))![1]!;
    const raw = Buffer.from(b64, 'base64').toString('utf8');
    await eventually(
      async () => (await status(`${gw.gateway}/keyed/x`, { authorization: raw })) === 200,
      5000,
      'generated key served',
    );
  });

  test('conflict lines name both files', async () => {
    expect(
      linesWith(
        gw,
        'resource refused: ApiDefinition default/twin (twin-b.yaml) conflicts with ApiDefinition default/twin (twin-a.yaml)',
      ),
    ).toHaveLength(1);
    expect(
      linesWith(
        gw,
        'resource refused: ApiDefinition default/path-b (path-b.yaml) conflicts with ApiDefinition default/path-a (path-a.yaml)',
      ),
    ).toHaveLength(1);
    expect(await status(`${gw.gateway}/twin-a/x`)).toBe(200);
    expect(await status(`${gw.gateway}/twin-b/x`)).toBe(404);
  });
});

describe('gw standalone: hazards appearing while serving', () => {
  let gw: Standalone;
  let dir: string;

  beforeAll(async () => {
    dir = tempDir();
    writeFileSync(join(dir, 'good.yaml'), apiYaml('good', '/good/', echo.url));
    gw = await startStandalone(dir, [], { GW_LOG_LEVEL: 'info' }, { permissions: true });
  });
  afterAll(async () => {
    await gw?.stop();
    cleanup(dir);
  });

  const served = (path: string, want: number, what: string) =>
    eventually(async () => (await status(`${gw.gateway}${path}`)) === want, 5000, what);

  test('after a symbolic-link loop appears, edits to good files still take effect; the loop is warned about once', async () => {
    expect(await status(`${gw.gateway}/good/x`)).toBe(200);
    symlinkSync('lb.yaml', join(dir, 'la.yaml'));
    symlinkSync('la.yaml', join(dir, 'lb.yaml'));
    mkdirSync(join(dir, 'loopdir'));
    symlinkSync('../loopdir', join(dir, 'loopdir', 'self'));
    await eventually(async () => linesWith(gw, 'loopdir/self', 'symbolic link loop').length > 0, 5000, 'loop warning');
    expect(await status(`${gw.gateway}/good/x`)).toBe(200);
    writeFileSync(join(dir, 'good.yaml'), apiYaml('good', '/moved/', echo.url));
    await served('/moved/x', 200, 'edit after the loop');
    expect(await status(`${gw.gateway}/good/x`)).toBe(404);
    writeFileSync(join(dir, 'second.yaml'), apiYaml('second', '/second/', echo.url));
    await served('/second/x', 200, 'a new file after the loop');
    for (const path of ['la.yaml', 'lb.yaml', 'loopdir/self'])
      expect(linesWith(gw, path, 'symbolic link loop')).toHaveLength(1);
    expect(gw.output()).not.toContain('applying resources failed');
  });

  test('a FIFO named *.yaml does not freeze the process: one warning, and later edits still apply', async () => {
    await mkfifo(join(dir, 'pipe.yaml'));
    await eventually(async () => linesWith(gw, 'pipe.yaml', 'FIFO').length > 0, 5000, 'FIFO warning');
    expect(await status(`${gw.admin}/healthz`)).toBe(200);
    writeFileSync(join(dir, 'third.yaml'), apiYaml('third', '/third/', echo.url));
    await served('/third/x', 200, 'a new file after the FIFO');
    expect(linesWith(gw, 'pipe.yaml', 'FIFO')).toHaveLength(1);
  });

  test('a file that turns into an alias bomb keeps serving its previous version; the line names it', async () => {
    writeFileSync(join(dir, 'second.yaml'), aliasBomb);
    await eventually(
      async () => linesWith(gw, 'second.yaml', 'Excessive alias count').length > 0,
      5000,
      'alias bomb refused',
    );
    // the parse error is logged as the file is read; the keep line once the apply has merged the directory
    await eventually(
      async () => linesWith(gw, 'second.yaml', 'keeping its previous version').length > 0,
      5000,
      'previous version kept',
    );
    expect(linesWith(gw, 'second.yaml', 'keeping its previous version')).toHaveLength(1);
    expect(await status(`${gw.gateway}/second/x`)).toBe(200);
    expect(await status(`${gw.gateway}/moved/x`)).toBe(200);
  });

  test('a file or a subdirectory that turns unreadable keeps serving its previous version; the line names it', async () => {
    mkdirSync(join(dir, 'sub'));
    writeFileSync(join(dir, 'sub', 'deep.yaml'), apiYaml('deep', '/deep/', echo.url));
    writeFileSync(join(dir, 'lockme.yaml'), apiYaml('lockme', '/lockme/', echo.url));
    await served('/deep/x', 200, 'sub/deep.yaml served');
    await served('/lockme/x', 200, 'lockme.yaml served');
    chmodSync(join(dir, 'sub'), 0o000);
    chmodSync(join(dir, 'lockme.yaml'), 0o000);
    await eventually(
      async () =>
        linesWith(gw, 'lockme.yaml', 'EACCES').length > 0 &&
        linesWith(gw, 'resource refused: sub:', 'EACCES').length > 0,
      5000,
      'unreadable paths refused',
    );
    await eventually(
      async () =>
        linesWith(gw, 'sub/deep.yaml', 'keeping its previous version').length > 0 &&
        linesWith(gw, 'lockme.yaml', 'keeping its previous version').length > 0,
      5000,
      'previous versions kept',
    );
    expect(linesWith(gw, 'sub/deep.yaml', 'keeping its previous version')).toHaveLength(1);
    expect(linesWith(gw, 'lockme.yaml', 'keeping its previous version')).toHaveLength(1);
    expect(await status(`${gw.gateway}/deep/x`)).toBe(200);
    expect(await status(`${gw.gateway}/lockme/x`)).toBe(200);
    chmodSync(join(dir, 'sub'), 0o755);
    chmodSync(join(dir, 'lockme.yaml'), 0o644);
  });

  test('a file that had no resources and turns oversize is "not loaded", not "keeping its previous version"', async () => {
    // an empty file first (as `truncate` or a copy in progress leaves it), read with a good file beside it
    writeFileSync(join(dir, 'grows.yaml'), '');
    writeFileSync(join(dir, 'beside.yaml'), apiYaml('beside', '/beside/', echo.url));
    await served('/beside/x', 200, 'beside.yaml served');
    writeFileSync(
      join(dir, 'grows.yaml.tmp'),
      apiYaml('grows', '/grows/', echo.url) + `# ${'x'.repeat(2 * 1024 * 1024)}\n`,
    );
    renameSync(join(dir, 'grows.yaml.tmp'), join(dir, 'grows.yaml'));
    await eventually(async () => linesWith(gw, 'grows.yaml', 'too large').length > 0, 5000, 'oversize refused');
    await eventually(async () => linesWith(gw, 'grows.yaml', 'not loaded').length > 0, 5000, 'not-loaded line');
    expect(linesWith(gw, 'grows.yaml', 'not loaded')).toHaveLength(1);
    expect(linesWith(gw, 'grows.yaml', 'keeping its previous version')).toEqual([]);
    expect(await status(`${gw.gateway}/grows/x`)).toBe(404);
    expect(await status(`${gw.gateway}/beside/x`)).toBe(200);
  });
});

describe('gw standalone: a directory that cannot be read at start-up', () => {
  let gw: Standalone;
  let dir: string;

  beforeAll(async () => {
    dir = tempDir();
    writeFileSync(join(dir, 'good.yaml'), apiYaml('good', '/good/', echo.url));
    chmodSync(dir, 0o300); // searchable, not listable
    gw = await startStandalone(dir, [], {}, { permissions: true });
  });
  afterAll(async () => {
    await gw?.stop();
    chmodSync(dir, 0o700);
    cleanup(dir);
  });

  test('/readyz is 503 while nothing has been loaded, and 200 once the directory can be read', async () => {
    expect(gw.output()).toContain('cannot read resources directory; nothing loaded yet');
    expect(gw.output()).not.toContain('applying resources failed');
    expect(await status(`${gw.admin}/readyz`)).toBe(503);
    expect(await status(`${gw.gateway}/good/x`)).toBe(404);
    chmodSync(dir, 0o755);
    await eventually(async () => (await status(`${gw.admin}/readyz`)) === 200, 5000, 'ready once readable');
    expect(await status(`${gw.gateway}/good/x`)).toBe(200);
  });
});
