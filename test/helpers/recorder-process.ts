/**
 * The DRL tests' recording upstream (drl-traffic.ts's startRecorder) in a process of its own: an upstream
 * inside the jest worker stamps a request only when that worker's event loop is free, and the worker also
 * runs every load generator of the suite, so on a loaded machine its stamps come in bursts a second late —
 * arrivals the gateways spaced in time read as one. Here the upstream's receive times are its own, as a
 * real upstream's are. Run as a script it serves; `GET /__times` answers every receive time by first path
 * segment (the request is not recorded).
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import type { Recorder } from './drl-traffic.js';

const SELF = fileURLToPath(import.meta.url);

function serve(): void {
  const seen: Record<string, number[]> = {};
  const server: Server = createServer((req, res) => {
    const at = Date.now();
    const seg = (req.url ?? '/').split('/')[1] ?? '';
    if (seg === '__times') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(seen));
      return;
    }
    (seen[seg] ??= []).push(at);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });
  server.keepAliveTimeout = 30_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`recorder listening on ${(server.address() as { port: number }).port}\n`);
  });
  process.on('disconnect', () => process.exit(0));
}

/** A recorder in its own process: `sync()` fetches its receive times, which `times` and `all` then answer. */
export interface ProcessRecorder extends Recorder {
  sync(): Promise<void>;
}

export async function startRecorderProcess(): Promise<ProcessRecorder> {
  const child = spawn(process.execPath, [SELF, 'serve'], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /recorder listening on (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`recorder exited ${code}: ${out}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  let seen: Record<string, number[]> = {};
  return {
    url,
    async sync() {
      const r = await request(`${url}/__times`);
      seen = (await r.body.json()) as Record<string, number[]>;
    },
    times: (segment) => [...(seen[segment] ?? [])].sort((a, b) => a - b),
    all: () =>
      Object.values(seen)
        .flat()
        .sort((a, b) => a - b),
    close: () =>
      new Promise<void>((r) => {
        if (child.exitCode !== null) return r();
        child.once('exit', () => r());
        child.kill();
      }),
  };
}

if (process.argv[1] === SELF && process.argv[2] === 'serve') serve();
