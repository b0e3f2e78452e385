/**
 * OAuth token issuance of `gw standalone` as its store grows (docs/oauth.md, "Storage"): one client
 * (`max_tokens_per_client` raised to GW_BENCH_TOKENS + 1,000 so that none is revoked) gets GW_BENCH_TOKENS
 * (6,000) client_credentials tokens one after the other over HTTP on loopback; printed: the mean and p99
 * issuance time of the first 200 and of 200 more once GW_BENCH_TOKENS are held, and the bytes the journal
 * and the state file hold. Run: `node dist/test/bench/oauth-issuance.js` (after `make build`).
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { oauthManifests, postForm, startOAuthStandalone } from '../helpers/oauth.js';

const TOKENS = Number(process.env.GW_BENCH_TOKENS ?? 6_000);
const SAMPLE = 200;
const SECRET = 'bench-secret-0123456789abcdef';

const st = await startOAuthStandalone((target) => ({
  'oauth.yaml': oauthManifests({
    api: 'oa',
    target,
    policy: 'roomy',
    rate: 1_000_000,
    per: 60,
    meta: `{max_tokens_per_client: ${TOKENS + 1000}}`,
    clients: [{ name: 'app', id: 'app', secret: SECRET }],
  }),
}));
try {
  const issueMs = async (): Promise<number> => {
    const t0 = performance.now();
    const r = await postForm(`${st.sa.gateway}/oa/oauth/token`, {
      grant_type: 'client_credentials',
      client_id: 'app',
      client_secret: SECRET,
    });
    const ms = performance.now() - t0;
    if (r.status !== 200) throw new Error(`token endpoint: ${r.status} ${r.text}`);
    return ms;
  };
  const stats = (xs: number[]): string => {
    const s = [...xs].sort((a, b) => a - b);
    const mean = s.reduce((a, b) => a + b, 0) / s.length;
    return `mean ${mean.toFixed(2)} ms, p50 ${s[Math.floor(s.length / 2)]!.toFixed(2)} ms, p99 ${s[Math.floor(s.length * 0.99)]!.toFixed(2)} ms`;
  };
  for (let i = 0; i < 20; i++) await issueMs(); // warm-up (connection, JIT)
  const first: number[] = [];
  for (let i = 0; i < SAMPLE; i++) first.push(await issueMs());
  for (let i = 20 + SAMPLE; i < TOKENS; i++) await issueMs();
  const later: number[] = [];
  for (let i = 0; i < SAMPLE; i++) later.push(await issueMs());
  const gwDir = join(st.dir, '.gw');
  const sizes = readdirSync(gwDir)
    .filter((f) => f.startsWith('.oauth-tokens'))
    .map((f) => `${f}: ${statSync(join(gwDir, f)).size} bytes`);
  console.log(`issuance with ~0 tokens held:      ${stats(first)}`);
  console.log(`issuance with ${TOKENS} tokens held: ${stats(later)}`);
  console.log(sizes.join('\n'));
} finally {
  await st.stop();
}
