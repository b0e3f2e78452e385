/** Runs the real `gw` client binary (compiled CLI) the way a pipeline does: facade URL and credentials from the environment. */
import { spawn } from 'node:child_process';
import { CLI } from './standalone.js';

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON (undefined when empty or not JSON). */
  json: unknown;
}

/**
 * `gw <args>` against the facade at `url`; the environment carries no GW_* variable but GW_FACADE_URL and
 * those of `env` (an undefined value leaves one out); `stdin` is written to its standard input.
 */
export function runGw(
  args: string[],
  o: { url: string; env?: Record<string, string | undefined>; stdin?: string | Uint8Array },
): Promise<Run> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('GW_')) env[k] = v;
  for (const [k, v] of Object.entries({ GW_FACADE_URL: o.url, ...o.env })) if (v !== undefined) env[k] = v;
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [CLI, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => {
      let json: unknown;
      try {
        json = stdout.trim() ? (JSON.parse(stdout) as unknown) : undefined;
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
    // a command that stops reading early (a bounded stdin) closes the pipe: EPIPE here is not a failure
    p.stdin.on('error', () => {});
    p.stdin.end(o.stdin ?? '');
  });
}

/** A failure: nothing on stdout, exactly one line on stderr naming the command. */
export function expectFailure(r: Run, code: number, pattern: RegExp): void {
  expect({ code: r.code, stdout: r.stdout }).toEqual({ code, stdout: '' });
  expect(r.stderr).toMatch(/^gw [a-z]+( [a-z]+)?: .+\n$/);
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
  expect(r.stderr).toMatch(pattern);
}
