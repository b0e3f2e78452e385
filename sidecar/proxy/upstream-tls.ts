/**
 * TLS towards an `https://` upstream (docs/proxy.md, "Upstream TLS"): an API's `proxy.transport` names a CA
 * bundle, a client certificate and key, an SNI name; verification is on unless ssl_insecure_skip_verify
 * says otherwise (logged once per API). The files are read once per compiled API (a config change reads
 * them again); connections are pooled per origin and options (`key`).
 */
import type { ConnectionOptions } from 'node:tls';
import type { CompiledApi } from '../../contract/config.js';
import type { Logger } from '../../lib/logger.js';
const { readFileSync } = process.getBuiltinModule('node:fs');

export interface UpstreamTls {
  /** Identifies the options: pools and sessions are per origin and key. */
  key: string;
  opts: ConnectionOptions;
}

const cache = new WeakMap<CompiledApi, UpstreamTls | Error>();
const warnedInsecure = new Set<string>();

/** The TLS options of an API's https:// upstream; undefined without proxy.transport; an Error naming an unreadable file. */
export function upstreamTlsOf(api: CompiledApi, logger: Logger): UpstreamTls | Error | undefined {
  const t = api.transport;
  if (t === undefined) return undefined;
  let found = cache.get(api);
  if (found === undefined) {
    found = build(api, logger);
    cache.set(api, found);
  }
  return found;
}

function build(api: CompiledApi, logger: Logger): UpstreamTls | Error {
  const t = api.transport!;
  const opts: ConnectionOptions = {};
  if ((t.ssl_cert_file === undefined) !== (t.ssl_key_file === undefined))
    return new Error(`api ${api.api_id}: proxy.transport: ssl_cert_file and ssl_key_file go together`);
  try {
    if (t.ssl_ca_cert_file !== undefined) opts.ca = readFileSync(t.ssl_ca_cert_file);
    if (t.ssl_cert_file !== undefined) opts.cert = readFileSync(t.ssl_cert_file);
    if (t.ssl_key_file !== undefined) opts.key = readFileSync(t.ssl_key_file);
  } catch (e) {
    return new Error(`api ${api.api_id}: proxy.transport: ${(e as Error).message}`, { cause: e });
  }
  if (t.ssl_server_name !== undefined) opts.servername = t.ssl_server_name;
  if (t.ssl_insecure_skip_verify === true) {
    opts.rejectUnauthorized = false;
    const id = `${api.namespace}/${api.api_id}`;
    if (!warnedInsecure.has(id)) {
      warnedInsecure.add(id);
      logger.warn(
        { api: api.api_id, namespace: api.namespace },
        'proxy.transport.ssl_insecure_skip_verify: the upstream certificate is not verified',
      );
    }
  }
  return { key: JSON.stringify(t), opts };
}
