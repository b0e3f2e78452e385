/** A private CA and certificates signed by it, made with the machine's openssl, for TLS tests. */
import { execFileSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect as tlsConnect } from 'node:tls';
import { join } from 'node:path';
import { tempDir } from './standalone.js';

export interface Issued {
  cert: string;
  key: string;
  /** SHA-256 of the certificate's DER, lower-case hex without colons. */
  fingerprint: string;
}

const openssl = (dir: string, args: string[]): void => {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
};

/** A CA in `dir` named `name` (files name.crt, name.key). */
export function makeCa(dir: string, name = 'ca'): Issued {
  openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.crt`,
  ]);
  return files(dir, name);
}

/** A new directory with a CA `ca` and the certificate `gw` it signs for localhost: a gateway listener's TLS files. */
export function gatewayCerts(): { dir: string; ca: Issued; gw: Issued } {
  const dir = tempDir('gw-certs-');
  return { dir, ca: makeCa(dir, 'ca'), gw: issue(dir, 'ca', 'gw', 'localhost') };
}

/**
 * A certificate for `cn` signed by the CA `ca` (in the same dir), with subjectAltName `san`
 * (`DNS:localhost,IP:127.0.0.1` by default) and extended key usage for servers and clients.
 */
export function issue(dir: string, ca: string, name: string, cn: string, san = 'DNS:localhost,IP:127.0.0.1'): Issued {
  openssl(dir, [
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-subj',
    `/CN=${cn}`,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
  ]);
  writeFileSync(
    join(dir, `${name}.ext`),
    `subjectAltName=${san}\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n`,
  );
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.crt`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-days',
    '2',
    '-out',
    `${name}.crt`,
    '-extfile',
    `${name}.ext`,
  ]);
  return files(dir, name);
}

function files(dir: string, name: string): Issued {
  const cert = join(dir, `${name}.crt`);
  const der = new X509Certificate(readFileSync(cert)).raw;
  return { cert, key: join(dir, `${name}.key`), fingerprint: createHash('sha256').update(der).digest('hex') };
}

/**
 * The fingerprint (as `Issued.fingerprint`) of the certificate 127.0.0.1:`port` serves a new connection for
 * `localhost` trusting the CA file `ca`, and the ALPN protocol chosen when `alpn` is offered.
 */
export function servedCertificate(
  port: number,
  ca: string,
  alpn?: string[],
): Promise<{ fp: string; alpn: string | false | null }> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect(
      {
        port,
        host: '127.0.0.1',
        ca: readFileSync(ca),
        servername: 'localhost',
        ...(alpn ? { ALPNProtocols: alpn } : {}),
      },
      () => {
        const fp = s.getPeerCertificate().fingerprint256.replace(/:/g, '').toLowerCase();
        const chosen = s.alpnProtocol;
        s.end();
        resolve({ fp, alpn: chosen });
      },
    );
    s.on('error', reject);
  });
}

/** The fingerprint of the certificate 127.0.0.1:`port` serves a new connection (see servedCertificate). */
export const servedFingerprint = async (port: number, ca: string): Promise<string> =>
  (await servedCertificate(port, ca)).fp;
