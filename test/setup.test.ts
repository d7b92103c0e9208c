// npm run setup refuses a nats-server older than the one Spate needs (2.9.10 lost acknowledged
// messages after partitions, docs/multihost.md) before it installs anything, and the server it
// installs is the one the test kit runs and the deploy files name.
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { localNatsVersion } from './deploy-artifacts.js';

const root = resolve(import.meta.dirname, '..');
const dir = mkdtempSync(join(tmpdir(), 'spate-setup-'));

/** Installers and fetchers setup could reach, each recording its call and failing: no test may install anything. */
const INSTALLERS = ['npm', 'apt-get', 'curl', 'dpkg-deb', 'install'];
const stubs = join(dir, 'stubs');
const calls = join(dir, 'calls');

function setupWith(natsServerBin: string): Promise<{ code: number; stdout: string; stderr: string }> {
  mkdirSync(stubs, { recursive: true });
  for (const name of INSTALLERS) {
    writeFileSync(join(stubs, name), `#!/bin/sh\necho "${name} $*" >> '${calls}'\nexit 99\n`);
    chmodSync(join(stubs, name), 0o755);
  }
  return new Promise((done) => {
    const env = { PATH: `${stubs}:${process.env.PATH}`, HOME: process.env.HOME, NATS_SERVER_BIN: natsServerBin };
    execFile('bash', [resolve(root, 'scripts/setup.sh')], { cwd: root, env, timeout: 20_000 }, (err, stdout, stderr) => {
      done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

function pinnedVersion(): string {
  const m = /^NATS_SERVER_MIN=(\S+)$/m.exec(readFileSync(resolve(root, 'scripts/setup.sh'), 'utf8'));
  if (!m) throw new Error('scripts/setup.sh sets no NATS_SERVER_MIN');
  return m[1]!;
}

describe('npm run setup', () => {
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('setup - a NATS_SERVER_BIN older than the version Spate needs is refused before anything is installed', async () => {
    const old = join(dir, 'nats-server-2.9.10');
    writeFileSync(old, '#!/bin/sh\necho "nats-server: v2.9.10"\n');
    chmodSync(old, 0o755);
    const needed = pinnedVersion();
    const ran = await setupWith(old);
    expect(ran.code).toBe(1);
    expect(ran.stderr).toContain(`is 2.9.10; Spate needs nats-server >= ${needed}`);
    expect(ran.stdout).not.toContain('installing');
    expect(existsSync(calls) ? readFileSync(calls, 'utf8') : '').toBe('');
  });

  it('setup - the nats-server it installs is the one the tests run against', () => {
    expect(localNatsVersion()).toBe(pinnedVersion());
    const deb = /^NATS_SERVER_DEB=\S+_(\d+\.\d+\.\d+)-[^_]+_amd64\.deb$/m.exec(readFileSync(resolve(root, 'scripts/setup.sh'), 'utf8'));
    expect(deb?.[1]).toBe(pinnedVersion());
  });
});
