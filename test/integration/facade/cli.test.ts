/**
 * The CLI for pipelines (`gw keys|oauth|proxy`): the real `gw` binary against a real `gw standalone`
 * process: keys created, used at the gateway, read back with live quota, deleted; OAuth clients; the
 * proxy with the gateway's rate-limit headers; a restart that loses nothing; every exit code reached.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { Exit } from '../../../cli/client/exit-codes.js';
import { sha256hex } from '../../../lib/hash.js';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { freePort } from '../../harness/ports.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';
import { expectFailure, runGw, type Run } from '../../helpers/gw-cli.js';

const SECRET = 'test-secret';
const TOKEN = 'test-token';

/** Runs the real binary with this suite's facade URL and credentials (`env` overrides them). */
function gw(
  args: string[],
  opts: { env?: Record<string, string | undefined>; stdin?: string; url?: string } = {},
): Promise<Run> {
  return runGw(args, {
    url: opts.url ?? sa.admin,
    env: { GW_SECRET: SECRET, GW_ACCESS_TOKEN: TOKEN, ...opts.env },
    ...(opts.stdin !== undefined ? { stdin: opts.stdin } : {}),
  });
}

async function atGateway(path: string, key?: string) {
  const r = await request(`${sa.gateway}${path}`, { headers: key ? { authorization: key } : {} });
  await r.body.text();
  return { status: r.statusCode, headers: r.headers };
}

const MANIFESTS = (target: string): string => `
apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: shop}
spec:
  api_id: shop
  proxy: {listen_path: /shop/, target_url: ${target}}
---
apiVersion: gw.io/v1alpha1
kind: Policy
metadata: {name: gold}
spec: {rate: 100, per: 60}
`;

/** Each test spawns the real binary several times (on a shared 2-core machine): a longer timeout. */
const slow = (name: string, fn: () => Promise<void>): void => test(name, fn, 60_000);

let echo: { server: Server; url: string };
let dir: string;
let sa: Standalone;

beforeAll(async () => {
  echo = await startEcho();
  dir = tempDir('gw-cli-');
  writeFileSync(join(dir, 'shop.yaml'), MANIFESTS(echo.url));
  sa = await startStandalone(dir);
});
afterAll(async () => {
  await sa?.stop();
  echo?.server.close();
  cleanup(dir);
});

describe('gw keys', () => {
  const KEY = 'ci-key-0001';
  let generated = '';

  slow(
    'create: exit 0, the facade answer {key, key_hash, action: added, status: ok} on stdout, nothing on stderr',
    async () => {
      const r = await gw([
        'keys',
        'create',
        KEY,
        '--body',
        JSON.stringify({ rate: 2, per: 60, quota_max: 10, quota_renewal_rate: 3600 }),
      ]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(Exit.OK);
      expect(r.json).toEqual({ key: KEY, key_hash: sha256hex(KEY), action: 'added', status: 'ok' });
      expect(r.stdout.trim().split('\n')).toHaveLength(1); // one JSON document per line
    },
  );

  slow('the key works at the gateway at once and hits its limit (rate 2 per 60 s)', async () => {
    expect((await atGateway('/shop/a', 'wrong-key')).status).toBe(403);
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await atGateway('/shop/a', KEY)).status);
    expect(statuses).toEqual([200, 200, 429]);
  });

  slow('get: exit 0, the session with live quota_remaining and quota_renews', async () => {
    const r = await gw(['keys', 'get', KEY, '--pretty']);
    expect(r.code).toBe(Exit.OK);
    expect(r.stdout).toContain('\n  "'); // --pretty indents
    const s = r.json as Record<string, number>;
    expect(s).toMatchObject({ rate: 2, per: 60, quota_max: 10, quota_renewal_rate: 3600 });
    expect(s.quota_remaining).toBe(8); // two admitted requests used the quota; the refused one did not
    expect(s.quota_renews).toBeGreaterThan(Date.now() / 1000 + 3000);
    expect(s.quota_renews).toBeLessThanOrEqual(Date.now() / 1000 + 3601);
  });

  slow('get: a per-API quota reads live in access_rights[api].limit.quota_remaining', async () => {
    const PER_API = 'ci-key-per-api';
    const body = {
      access_rights: {
        shop: {
          api_id: 'shop',
          limit: { rate: 100, per: 60, quota_max: 3, quota_remaining: 3, quota_renewal_rate: 3600 },
        },
      },
    };
    expect((await gw(['keys', 'create', PER_API, '--body', JSON.stringify(body)])).code).toBe(Exit.OK);
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await atGateway('/shop/a', PER_API)).status);
    expect(statuses).toEqual([200, 200, 200, 403]);
    const s = (await gw(['keys', 'get', PER_API])).json as {
      access_rights: { shop: { limit: { quota_remaining: number } } };
      quota_remaining?: number;
    };
    expect(s.access_rights.shop.limit.quota_remaining).toBe(0);
    expect(s.quota_remaining).toBeUndefined(); // the key itself has no quota
  });

  slow('create again with --suppress-reset keeps the live quota; without it the quota is reset', async () => {
    const body = JSON.stringify({ rate: 50, per: 60, quota_max: 10, quota_renewal_rate: 3600 });
    const kept = await gw(['keys', 'create', KEY, '--suppress-reset', '--body', body]);
    expect(kept.json).toMatchObject({ action: 'modified' });
    expect(((await gw(['keys', 'get', KEY])).json as { quota_remaining: number }).quota_remaining).toBe(8);
    const reset = await gw(['keys', 'create', KEY, '--body', body]);
    expect(reset.json).toMatchObject({ action: 'modified' });
    expect(((await gw(['keys', 'get', KEY])).json as { quota_remaining: number }).quota_remaining).toBe(10);
  });

  slow('update (PUT) replaces the session; --body-file and stdin ("-") bodies', async () => {
    const file = join(dir, '..', `gw-cli-body-${process.pid}.json`);
    writeFileSync(file, JSON.stringify({ rate: 7, per: 7 }));
    try {
      const u = await gw(['keys', 'update', KEY, '--body-file', file]);
      expect(u.code).toBe(Exit.OK);
      expect(u.json).toEqual({ key: KEY, key_hash: sha256hex(KEY), action: 'modified', status: 'ok' });
      expect((await gw(['keys', 'get', KEY])).json).toMatchObject({ rate: 7, per: 7 });
    } finally {
      cleanup(file);
    }
    const s = await gw(['keys', 'create', 'stdin-key', '--body-file', '-'], { stdin: '{"rate": 3, "per": 1}' });
    expect(s.json).toMatchObject({ key: 'stdin-key', action: 'added' });
    const b = await gw(['keys', 'update', 'stdin-key', '--body', '-'], { stdin: '{"rate": 4, "per": 1}' });
    expect(b.code).toBe(Exit.OK);
    expect((await gw(['keys', 'get', 'stdin-key'])).json).toEqual({ rate: 4, per: 1 });
    // an imported key that begins with "-" is the argument, not an unknown option echoed to stderr
    const dash = '-dash-leading-key';
    const d = await gw(['keys', 'create', dash, '--body', '{"rate": 3, "per": 1}']);
    expect({ code: d.code, stderr: d.stderr }).toEqual({ code: Exit.OK, stderr: '' });
    expect((await gw(['keys', 'update', dash, '--body', '{"rate": 5, "per": 1}'])).code).toBe(Exit.OK);
    expect((await gw(['keys', 'get', dash])).json).toEqual({ rate: 5, per: 1 });
    expect((await gw(['keys', 'delete', dash])).code).toBe(Exit.OK);
    expect((await gw(['keys', 'get', dash])).code).toBe(Exit.NOT_FOUND);
  });

  slow('create without a key id generates a random 256-bit key that works at the gateway', async () => {
    const r = await gw(['keys', 'create', '--body', '{"rate": 5, "per": 60}']);
    expect(r.code).toBe(Exit.OK);
    const a = r.json as { key: string; key_hash: string };
    expect(a.key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(a.key_hash).toBe(sha256hex(a.key));
    generated = a.key;
    expect((await atGateway('/shop/b', generated)).status).toBe(200);
  });

  slow('--hashed: import by hash; the raw key (never sent) works at the gateway; get/delete by hash', async () => {
    const raw = 'pipeline-secret-key-never-sent';
    const h = sha256hex(raw);
    const r = await gw(['keys', 'create', h, '--hashed', '--body', '{"rate": 5, "per": 60}']);
    expect(r.json).toEqual({ key: h, key_hash: h, action: 'added', status: 'ok' });
    expect((await atGateway('/shop/c', raw)).status).toBe(200);
    expect((await gw(['keys', 'get', h, '--hashed'])).json).toMatchObject({ rate: 5, per: 60 });
    expect((await gw(['keys', 'get', h])).code).toBe(Exit.NOT_FOUND); // without --hashed the id is hashed again
    expect((await gw(['keys', 'delete', h, '--hashed'])).json).toEqual({
      key: h,
      key_hash: h,
      action: 'deleted',
      status: 'ok',
    });
  });

  slow('list: exit 0, the hashes of every key', async () => {
    const r = await gw(['keys', 'list']);
    expect(r.code).toBe(Exit.OK);
    expect((r.json as { keys: string[] }).keys).toEqual(
      expect.arrayContaining([sha256hex(KEY), sha256hex(generated), sha256hex('stdin-key')]),
    );
  });

  slow('delete: exit 0 {action: deleted}; the gateway refuses the key; get is exit 2', async () => {
    const r = await gw(['keys', 'delete', generated]);
    expect(r.code).toBe(Exit.OK);
    expect(r.json).toEqual({ key: generated, key_hash: sha256hex(generated), action: 'deleted', status: 'ok' });
    expect((await atGateway('/shop/b', generated)).status).toBe(403);
    expectFailure(await gw(['keys', 'get', generated]), Exit.NOT_FOUND, /HTTP 404: key not found/);
    expectFailure(await gw(['keys', 'delete', generated]), Exit.NOT_FOUND, /HTTP 404/);
  });

  slow("a key id that begins with '-' goes after '--' (create, get, delete)", async () => {
    const dash = '-dash-key-0123456789abcdef';
    const c = await gw(['keys', 'create', '--body', '{"rate": 5, "per": 60}', '--', dash]);
    expect([c.code, c.stderr]).toEqual([Exit.OK, '']);
    expect(c.json).toMatchObject({ key: dash, action: 'added' });
    expect((await gw(['keys', 'get', '--', dash])).code).toBe(Exit.OK);
    expect((await gw(['keys', 'delete', '--', dash])).json).toMatchObject({ key: dash, action: 'deleted' });
  });

  slow('a key id with "/", ".." or "?" is one path segment, never a path (percent-encoded)', async () => {
    const odd = '../../x/../y?z=1#f';
    const r = await gw(['keys', 'create', odd, '--body', '{"rate": 1, "per": 1}']);
    expectFailure(r, Exit.REFUSED, /HTTP 400: keyID: /); // path traversal in a key id is refused by the facade
    expectFailure(await gw(['keys', 'get', '..']), Exit.REFUSED, /keyID/);
    const plain = 'a/b?c';
    expect((await gw(['keys', 'create', plain, '--body', '{}'])).json).toMatchObject({
      key: plain,
      key_hash: sha256hex(plain),
      action: 'added',
    });
    expect((await gw(['keys', 'delete', plain])).code).toBe(Exit.OK);
  });
});

describe('gw oauth', () => {
  slow('create with a body: exit 0, the client object with the supplied fields and the secret', async () => {
    const body = {
      client_id: 'ci-client',
      policy_id: 'gold',
      redirect_uri: 'https://ci.example/cb',
      meta_data: { team: 'ci' },
      client_name: 'CI',
    };
    const r = await gw(['oauth', 'create', 'shop', '--body', JSON.stringify(body)]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(Exit.OK);
    expect(r.json).toEqual({
      ...body,
      description: '',
      secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      dcr_registration: { access_token: '', client_uri: '', provider: '' },
    });
  });

  slow(
    'create without a body generates client_id and secret; get returns the secret; list omits it; delete',
    async () => {
      const c = await gw(['oauth', 'create', 'shop']);
      expect(c.code).toBe(Exit.OK);
      const made = c.json as { client_id: string; secret: string };
      expect(made.client_id).toMatch(/^[0-9a-f]{32}$/);
      const g = await gw(['oauth', 'get', 'shop', made.client_id]);
      expect(g.json).toMatchObject({ client_id: made.client_id, secret: made.secret });
      const l = await gw(['oauth', 'list', 'shop']);
      const items = l.json as Record<string, unknown>[];
      expect(items.map((i) => i.client_id).sort()).toEqual(['ci-client', made.client_id].sort());
      for (const i of items) expect(i).not.toHaveProperty('secret');
      expect((await gw(['oauth', 'delete', 'shop', made.client_id])).json).toEqual({
        key: made.client_id,
        action: 'deleted',
        status: 'ok',
      });
      expectFailure(await gw(['oauth', 'get', 'shop', made.client_id]), Exit.NOT_FOUND, /HTTP 404/);
    },
  );

  slow('unknown API → exit 2; duplicate client_id → exit 4; missing policy → exit 4 naming the field', async () => {
    expectFailure(await gw(['oauth', 'create', 'nope']), Exit.NOT_FOUND, /API not found/);
    expectFailure(
      await gw(['oauth', 'create', 'shop', '--body', '{"client_id":"ci-client"}']),
      Exit.REFUSED,
      /HTTP 409/,
    );
    expectFailure(
      await gw(['oauth', 'create', 'shop', '--body', '{"policy_id":"none"}']),
      Exit.REFUSED,
      /HTTP 400: policy_id: /,
    );
  });
});

describe('gw proxy', () => {
  const KEY = 'proxy-key';
  beforeAll(async () => {
    expect((await gw(['keys', 'create', KEY, '--body', '{"rate": 2, "per": 60}'])).code).toBe(Exit.OK);
  });

  slow(
    'exit 0 with {status_code, headers, body}: the gateway rate-limit headers and the parsed upstream JSON',
    async () => {
      const t0 = Date.now();
      const r = await gw([
        'proxy',
        'POST',
        `${sa.gateway}/shop/orders?x=1`,
        '-H',
        `Authorization: ${KEY}`,
        '-H',
        'X-Trace: 7',
        '--data',
        '{"n":1}',
      ]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(Exit.OK);
      const a = r.json as {
        status_code: number;
        headers: Record<string, string>;
        body: { method: string; path: string; body: string; headers: Record<string, string> };
      };
      expect(a.status_code).toBe(200);
      expect(a.headers['x-ratelimit-limit']).toBe('2');
      expect(a.headers['x-ratelimit-remaining']).toBe('1');
      // one more request is admitted at once (1 remaining): Reset is the request's own second, rounded up
      // (it was compared with the clock after the call, which could be a second later: a flaky assertion)
      expect(Number(a.headers['x-ratelimit-reset'])).toBeGreaterThanOrEqual(Math.floor(t0 / 1000));
      expect(Number(a.headers['x-ratelimit-reset'])).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
      expect(a.body).toMatchObject({ method: 'POST', path: '/orders?x=1', body: '{"n":1}' });
      expect(a.body.headers['x-trace']).toBe('7');
      expect(a.body.headers.authorization).toBe(KEY); // the gateway credential is sent; the facade token never is
    },
  );

  slow(
    'the whole request as --body (one URL argument means GET); the limit reached is still exit 0, or 8 with --fail',
    async () => {
      const req = JSON.stringify({ url: `${sa.gateway}/shop/x`, headers: { authorization: KEY } });
      const ok = await gw(['proxy', '--body', req]);
      expect((ok.json as { status_code: number }).status_code).toBe(200);
      const limited = await gw(['proxy', `${sa.gateway}/shop/x`, '-H', `Authorization: ${KEY}`]);
      expect(limited.code).toBe(Exit.OK);
      const a = limited.json as { status_code: number; headers: Record<string, string> };
      expect(a.status_code).toBe(429);
      expect(a.headers['x-ratelimit-remaining']).toBe('0');
      expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      const failing = await gw(['proxy', `${sa.gateway}/shop/x`, '-H', `Authorization: ${KEY}`, '--fail']);
      expect(failing.code).toBe(Exit.PROXIED_ERROR);
      expect((failing.json as { status_code: number }).status_code).toBe(429); // printed anyway
    },
  );

  slow('hostile URLs and header injection: exit 4 with the facade message, nothing sent', async () => {
    const port = Number(new URL(sa.gateway).port);
    for (const url of [
      `${echo.url}/direct`,
      `http://127.0.0.1:${port + 1}/x`,
      `https://127.0.0.1:${port}/x`,
      `http://u:p@127.0.0.1:${port}/x`,
      'file:///etc/passwd',
    ]) {
      expectFailure(await gw(['proxy', url]), Exit.REFUSED, /HTTP 400: url: /);
    }
    expectFailure(
      await gw(['proxy', `${sa.gateway}/shop/x`, '--body', JSON.stringify({ headers: { 'x-a': 'a\r\nx-b: b' } })]),
      Exit.REFUSED,
      /CR, LF/,
    );
  });
});

describe('exit codes', () => {
  slow(
    '1: usage and local input (bad JSON, non-object, unreadable file, missing argument, bad --url, unknown flag)',
    async () => {
      expectFailure(await gw(['keys', 'create', 'k', '--body', '{"rate":']), Exit.USAGE, /--body: invalid JSON/);
      expectFailure(await gw(['keys', 'create', 'k', '--body', '[1]']), Exit.USAGE, /must be a JSON object/);
      expectFailure(await gw(['keys', 'create', 'k', '--body-file', '/nonexistent/x.json']), Exit.USAGE, /ENOENT/);
      expectFailure(
        await gw(['keys', 'create', 'k', '--body', '{}', '--body-file', 'x']),
        Exit.USAGE,
        /give one of them/,
      );
      expectFailure(await gw(['keys', 'get', 'k'], { url: 'ftp://127.0.0.1:1' }), Exit.USAGE, /GW_FACADE_URL/);
      expectFailure(await gw(['keys', 'get', 'k', '--timeout', 'soon']), Exit.USAGE, /--timeout/);
      const missing = await gw(['keys', 'get']);
      expect(missing.code).toBe(Exit.USAGE);
      expect(missing.stderr).toMatch(/missing required argument/);
      expect((await gw(['keys', 'get', 'k', '--colour'])).code).toBe(Exit.USAGE);
      expect((await gw(['keys', 'create', '--hashed'])).code).toBe(Exit.USAGE);
      expect((await gw(['proxy'])).code).toBe(Exit.USAGE);
    },
  );

  slow('2: not found', async () => {
    expectFailure(await gw(['keys', 'get', 'no-such-key']), Exit.NOT_FOUND, /HTTP 404/);
    // a wrong base path in --url is not "no such key" (a pipeline would take a delete as done): 5, check --url
    expectFailure(
      await gw(['keys', 'delete', 'no-such-key'], { url: `${sa.admin}/wrong/base` }),
      Exit.UNAVAILABLE,
      /HTTP 404: no such route under .*\/wrong\/base \(is --url the facade's base URL\?\)/,
    );
  });

  slow('3: credential missing or refused (env and flag; the flag wins)', async () => {
    expectFailure(await gw(['keys', 'list'], { env: { GW_SECRET: 'wrong' } }), Exit.AUTH, /HTTP 403/);
    expectFailure(await gw(['keys', 'list'], { env: { GW_SECRET: undefined } }), Exit.AUTH, /no secret: set GW_SECRET/);
    expectFailure(
      await gw(['oauth', 'list', 'shop'], { env: { GW_ACCESS_TOKEN: undefined } }),
      Exit.AUTH,
      /no access token/,
    );
    expectFailure(await gw(['oauth', 'list', 'shop', '--token', 'wrong']), Exit.AUTH, /HTTP 403/);
    expect((await gw(['keys', 'list', '--secret', SECRET], { env: { GW_SECRET: 'wrong' } })).code).toBe(Exit.OK);
    // a value read from a file keeps its newline: trimmed, as the facade trims its own (it was exit 5, "unreachable")
    expect((await gw(['keys', 'list'], { env: { GW_SECRET: `${SECRET}\n` } })).code).toBe(Exit.OK);
    const ctl = await gw(['keys', 'list'], { env: { GW_SECRET: `${SECRET}\u0007x` } });
    expectFailure(ctl, Exit.USAGE, /^gw keys list: --secret \/ GW_SECRET: holds a control character/);
    expect(ctl.stderr).not.toContain(SECRET);
  });

  slow('4: refused by the facade (schema, unknown field named)', async () => {
    expectFailure(await gw(['keys', 'create', 'k4', '--body', '{"rate":"fast"}']), Exit.REFUSED, /HTTP 400: rate: /);
    expectFailure(await gw(['keys', 'create', 'k4', '--body', '{"bogus":1}']), Exit.REFUSED, /bogus/);
    expectFailure(await gw(['keys', 'update', 'never-created', '--body', '{}']), Exit.NOT_FOUND, /HTTP 404/);
    expect((await gw(['keys', 'get', 'k4'])).code).toBe(Exit.NOT_FOUND); // nothing created
  });

  slow('5: facade unreachable (closed port), timeout, or not a facade', async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    expectFailure(await gw(['keys', 'list'], { url: closed }), Exit.UNAVAILABLE, /unreachable \(ECONNREFUSED\)/);
    const hanging = createServer(() => {
      /* never answers */
    });
    await new Promise<void>((r) => hanging.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(hanging.address() as AddressInfo).port}`;
      expectFailure(
        await gw(['keys', 'list', '--timeout', '0.5'], { url }),
        Exit.UNAVAILABLE,
        /did not answer within 0.5 s/,
      );
    } finally {
      hanging.closeAllConnections();
      await new Promise((r) => hanging.close(r));
    }
    // --url pointing at something that is not a facade (here the echo upstream): its 200 is not a proxy answer
    expectFailure(
      await gw(['proxy', `${sa.gateway}/shop/x`], { url: `${echo.url}` }),
      Exit.UNAVAILABLE,
      /no status_code/,
    );
  });

  slow(
    '9: a write stored but not Ready (cluster 504; emulated by a stub facade, since standalone applies at once)',
    async () => {
      const stub = createServer((req, res) => {
        req.resume();
        req.on('end', () => {
          res.writeHead(504, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              status: 'error',
              message: 'AccessKey default/key-1 was written and exists, but is not Ready after 10 s',
            }),
          );
        });
      });
      await new Promise<void>((r) => stub.listen(0, '127.0.0.1', r));
      try {
        const url = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
        // keys create prints the key it sent before failing: the retry with that key writes the same AccessKey
        const created = await gw(['keys', 'create', 'k9'], { url });
        expect(created.code).toBe(Exit.NOT_READY);
        expect(JSON.parse(created.stdout)).toEqual({ key: 'k9', key_hash: sha256hex('k9'), status: 'not_ready' });
        expect(created.stderr).toMatch(/^gw keys create: .*HTTP 504: AccessKey .* not Ready.*\n$/);
        expectFailure(await gw(['oauth', 'create', 'shop'], { url }), Exit.NOT_READY, /HTTP 504/);
        // on the proxy a 504 is the gateway's timeout, not readiness
        expectFailure(await gw(['proxy', 'http://127.0.0.1:1/'], { url }), Exit.GATEWAY_UNAVAILABLE, /HTTP 504/);
      } finally {
        await new Promise((r) => stub.close(r));
      }
    },
  );

  describe('6 and 7: a standalone with a tight facade limit and a dead gateway URL', () => {
    let sb: Standalone;
    let dirB: string;
    let dead: string;
    beforeAll(async () => {
      dirB = tempDir('gw-cli-b-');
      writeFileSync(join(dirB, 'shop.yaml'), MANIFESTS(echo.url));
      dead = `http://127.0.0.1:${await freePort()}`;
      const cfg = join(dirB, '..', `gw-cli-b-${process.pid}.yaml`);
      writeFileSync(cfg, `gateway_urls: ["${dead}"]\nfacade_rate_limit: {rate: 3, per: 60}\nproxy_timeout: 2\n`);
      sb = await startStandalone(dirB, ['--config', cfg]);
      cleanup(cfg);
    });
    afterAll(async () => {
      await sb?.stop();
      cleanup(dirB);
    });

    slow('7: the gateway behind the facade is unreachable (502)', async () => {
      expectFailure(
        await gw(['proxy', `${dead}/shop/x`], { url: sb.admin }),
        Exit.GATEWAY_UNAVAILABLE,
        /HTTP 502: gateway unreachable/,
      );
    });

    slow('6: the facade rate-limits this client (429, Retry-After in the message)', async () => {
      expect((await gw(['keys', 'list'], { url: sb.admin })).code).toBe(Exit.OK);
      expect((await gw(['keys', 'list'], { url: sb.admin })).code).toBe(Exit.OK);
      expectFailure(
        await gw(['keys', 'list'], { url: sb.admin }),
        Exit.RATE_LIMITED,
        /HTTP 429: .*\(retry after \d+ s\)/,
      );
    });
  });
});

describe('restart of gw standalone', () => {
  slow('keys and OAuth clients made through the CLI survive; the key still works at the gateway', async () => {
    const before = await gw(['oauth', 'get', 'shop', 'ci-client']);
    expect(before.code).toBe(Exit.OK);
    expect(await sa.stop()).toBe(0);
    sa = await startStandalone(dir);
    expect((await gw(['keys', 'get', 'stdin-key'])).json).toEqual({ rate: 4, per: 1 });
    expect((await gw(['oauth', 'get', 'shop', 'ci-client'])).json).toEqual(before.json);
    expect((await gw(['keys', 'list'])).json).toEqual({
      keys: expect.arrayContaining([sha256hex('ci-key-0001'), sha256hex('proxy-key'), sha256hex('stdin-key')]),
    });
    expect((await atGateway('/shop/r', 'stdin-key')).status).toBe(200);
  });
});
