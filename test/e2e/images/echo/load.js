/* global process, setTimeout, console */
// In-cluster load client of the e2e suite: node /app/load.js URL [key=value ...]
//   requests=N      stop after N requests (default 100); duration=S stops after S seconds instead
//   concurrency=C   parallel loops (default 1)
//   rps=R           at most R requests per second per loop (default: as fast as answers come)
//   key=K           sent as the Authorization header
//   fresh=1         a new connection per request (kube-proxy then spreads them over the Service's pods)
// Prints one JSON line: {"statuses":{code:count},"errors":n,"perSecond":[{code:count}...],"pods":{pod:count}}
// with per-second buckets from the client's own clock (start = 0). Bounded by the count or the duration.
import http from 'node:http';

const [url, ...rest] = process.argv.slice(2);
const opt = Object.fromEntries(rest.map((a) => a.split('=', 2)));
const requests = Number(opt.requests ?? 100);
const duration = opt.duration ? Number(opt.duration) * 1000 : 0;
const concurrency = Number(opt.concurrency ?? 1);
const gap = opt.rps ? 1000 / Number(opt.rps) : 0;
const agent = new http.Agent({ keepAlive: opt.fresh !== '1', maxSockets: concurrency });
const headers = opt.key ? { authorization: opt.key } : {};

const statuses = {};
const perSecond = [];
const pods = {};
let errors = 0;
let sent = 0;
const start = Date.now();

function once() {
  return new Promise((resolve) => {
    const req = http.get(url, { agent, headers, timeout: 10000 }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => {
        const s = Math.floor((Date.now() - start) / 1000);
        perSecond[s] ??= {};
        perSecond[s][res.statusCode] = (perSecond[s][res.statusCode] ?? 0) + 1;
        statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
        if (res.statusCode === 200) {
          try {
            const pod = JSON.parse(body).pod;
            pods[pod] = (pods[pod] ?? 0) + 1;
          } catch {
            // a 200 that is not the echo's JSON is counted by status only
          }
        }
        resolve();
      });
      res.on('error', () => {
        errors++;
        resolve();
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => {
      errors++;
      resolve();
    });
  });
}

async function loop() {
  for (;;) {
    const now = Date.now();
    if (duration ? now - start >= duration : sent >= requests) return;
    sent++;
    await once();
    const wait = gap - (Date.now() - now);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
}

await Promise.all(Array.from({ length: concurrency }, loop));
agent.destroy();
for (let i = 0; i < perSecond.length; i++) perSecond[i] ??= {};
console.log(JSON.stringify({ statuses, errors, perSecond, pods, ms: Date.now() - start }));
