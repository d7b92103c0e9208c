// A private certificate authority and a server certificate for 127.0.0.1, made with openssl in a
// test's temp dir: for NATS with TLS required.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TestCertificates {
  caFile: string;
  certFile: string;
  keyFile: string;
}

export function makeTestCertificates(dir: string): TestCertificates {
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=spate test CA', '-keyout', file('ca-key.pem'), '-out', file('ca.pem'));
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', file('server-key.pem'), '-out', file('server.csr'));
  writeFileSync(file('server.ext'), 'subjectAltName = IP:127.0.0.1, DNS:localhost\nextendedKeyUsage = serverAuth\n');
  openssl('x509', '-req', '-in', file('server.csr'), '-CA', file('ca.pem'), '-CAkey', file('ca-key.pem'), '-CAcreateserial', '-days', '2', '-extfile', file('server.ext'), '-out', file('server.pem'));
  return { caFile: file('ca.pem'), certFile: file('server.pem'), keyFile: file('server-key.pem') };
}
