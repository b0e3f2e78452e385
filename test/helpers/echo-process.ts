/**
 * The echo upstream (scripts/echo-upstream.ts) in a process of its own, for tests that measure latency:
 * an upstream inside the jest worker answers only when that worker's event loop is free.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ECHO = fileURLToPath(new URL('../../scripts/echo-upstream.js', import.meta.url));

export async function startEchoProcess(): Promise<{ url: string; pid: number; stop: () => void }> {
  const child = spawn(process.execPath, [ECHO, '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`echo upstream exited ${code}: ${out}`)));
  });
  return { url, pid: child.pid!, stop: () => child.kill() };
}
