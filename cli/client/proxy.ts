/** `gw proxy`: POST /api/proxy — one request to a gateway URL through the facade (bearer token). */
import { Command } from 'commander';
import { z } from 'zod';
import { readBody, type BodyFlags } from './body.js';
import { resolveConnection, type ConnectionFlags } from './connection.js';
import { ClientError, Exit, type ExitCode } from './exit-codes.js';
import { callFacade } from './http.js';
import { clientAction, clientOptions, printJson, type OutputFlags } from './run.js';

type ProxyFlags = ConnectionFlags & BodyFlags & OutputFlags & { header: string[]; data?: string; fail?: boolean };

/** The part of the facade's answer the exit code depends on. */
const ProxyAnswer = z.object({ status_code: z.number().int() });

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** "Name: value" → [name, value]; the facade validates names and refuses CR/LF. */
function parseHeader(h: string): [string, string] {
  const i = h.indexOf(':');
  if (i <= 0) throw new ClientError(Exit.USAGE, `--header ${JSON.stringify(h)}: expected "Name: value"`);
  return [h.slice(0, i).trim(), h.slice(i + 1).trim()];
}

/** --data: JSON when it parses, else sent as a string. */
function parseData(data: string): unknown {
  try {
    return JSON.parse(data) as unknown;
  } catch {
    return data;
  }
}

export function buildProxyRequest(
  method: string | undefined,
  url: string | undefined,
  flags: ProxyFlags,
): Record<string, unknown> {
  const req: Record<string, unknown> = { ...readBody(flags, {}) };
  // One positional argument is the URL (method GET), or the method when it is a bare token (`gw proxy
  // POST --body req.json` takes the URL from the body); two are METHOD URL.
  if (method !== undefined && url === undefined && !/^[A-Za-z]+$/.test(method)) {
    url = method;
    method = req.method === undefined ? 'GET' : undefined;
  }
  if (method !== undefined) req.method = method;
  if (url !== undefined) req.url = url;
  if (flags.header.length) {
    const given = req.headers;
    const headers: Record<string, unknown> =
      given && typeof given === 'object' && !Array.isArray(given) ? { ...(given as Record<string, unknown>) } : {};
    for (const h of flags.header) {
      const [k, v] = parseHeader(h);
      headers[k] = v;
    }
    req.headers = headers;
  }
  if (flags.data !== undefined) req.body = parseData(flags.data);
  if (req.url === undefined)
    throw new ClientError(Exit.USAGE, 'a URL is needed: gw proxy [METHOD] URL, or "url" in --body');
  if (req.method === undefined) req.method = 'GET';
  return req;
}

export function proxyCommand(): Command {
  const cmd = new Command('proxy')
    .description(
      'Send one request to a gateway URL through the facade (POST /api/proxy). Prints {status_code, headers, body}; ' +
        'exit 0 whatever the proxied status unless --fail',
    )
    .argument('[method]', 'HTTP method (default GET); one argument that is not a bare word is the URL')
    .argument('[url]', 'absolute gateway URL (an origin in gateway_urls)')
    .option('-H, --header <header>', '"Name: value" header for the proxied request (repeatable)', collect, [])
    .option('-d, --data <data>', 'body of the proxied request: JSON when it parses, else a string');
  const body = {
    json: 'the whole proxy request {method, url, headers, body} as JSON; "-" reads stdin (flags override its fields)',
    file: 'read the proxy request from a file; "-" reads stdin',
  };
  clientOptions(cmd, { body, creds: { token: true } }, (c) => {
    c.option(
      '--fail',
      `exit ${Exit.PROXIED_ERROR} when the proxied status is 400 or more (the answer is still printed)`,
    );
  });
  cmd.action(
    clientAction(async (method: string | undefined, url: string | undefined, flags: ProxyFlags): Promise<ExitCode> => {
      const conn = resolveConnection(flags);
      const body = buildProxyRequest(method, url, flags);
      const answer = await callFacade(conn, {
        method: 'POST',
        path: '/api/proxy',
        credential: 'bearer',
        body,
        proxy: true,
      });
      const a = ProxyAnswer.safeParse(answer);
      if (!a.success)
        throw new ClientError(Exit.UNAVAILABLE, 'facade answer has no status_code (is --url the facade?)');
      printJson(answer, flags);
      return flags.fail && a.data.status_code >= 400 ? Exit.PROXIED_ERROR : Exit.OK;
    }),
  );
  return cmd;
}
