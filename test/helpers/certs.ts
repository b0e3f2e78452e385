/** A private CA and certificates signed by it, made with the machine's openssl, for TLS tests. */
import { execFileSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

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
