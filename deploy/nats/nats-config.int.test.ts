// The NATS configuration files of deploy/nats against the real nats-server (2.15.1 here): they
// parse, and the settings they share reach every way Spate runs NATS — the launcher and test kit
// (natsConfigText), compose (compose-node.conf) and the nats Helm chart (nats-values.yaml).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { afterEach, describe, expect, it } from 'vitest';
import { connectNats, NATS_USERS } from '../../lib/index.js';
import { freePort, startNats, waitFor } from '../../test/kit/index.js';
import { localNatsVersion, natsAuthUsers, parseYaml, readRepoFile, repoPath } from '../../test/deploy-artifacts.js';
import {
  DEFAULT_MAX_PAYLOAD,
  generateNatsServerAuth,
  natsConfigDir,
  natsConfigText,
  natsServerEnv,
  waitForJetStreamLeader,
  type NatsServerAuth,
} from '../local/nats-server.js';

const NATS_BIN = process.env.NATS_SERVER_BIN ?? 'nats-server';
const MiB = 1024 * 1024;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'spate-nats-config-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** `nats-server -t -c FILE`: parses the config (and its includes) without starting. */
function checkConfig(file: string, env: Record<string, string> = {}): Promise<{ ok: boolean; output: string }> {
  return new Promise((resolve) => {
    execFile(NATS_BIN, ['-t', '-c', file], { env: { ...process.env, ...env } }, (err, stdout, stderr) => {
      resolve({ ok: err === null, output: `${stdout}${stderr}`.trim() });
    });
  });
}

/** A nats-server child process, killed after the test. */
function startServer(args: string[], env: Record<string, string>, log: string): ChildProcess {
  const child = spawn(NATS_BIN, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  const stderr: Buffer[] = [];
  child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
  child.once('exit', () => writeFileSync(log, Buffer.concat(stderr)));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      }),
  );
  return child;
}

async function varz(monitorUrl: string): Promise<Record<string, unknown>> {
  return (await (await fetch(`${monitorUrl}/varz`)).json()) as Record<string, unknown>;
}

/** What compose and the Helm chart give nats-server: every user's password, and the route password. */
function serverEnv(auth: NatsServerAuth): Record<string, string> {
  return { ...natsServerEnv(auth), SPATE_NATS_ROUTE_PASSWORD: auth.routePassword };
}

async function healthy(monitorUrl: string): Promise<void> {
  await waitFor(`nats-server at ${monitorUrl}`, async () => (await fetch(`${monitorUrl}/healthz`).catch(() => undefined))?.ok === true, 30_000);
}

describe('nats config files', () => {
  it('nats config - base.conf, auth.conf, spate.conf, compose-node.conf and the launcher configs parse with the real nats-server', async () => {
    const auth = generateNatsServerAuth();
    expect(await checkConfig(repoPath('deploy/nats/base.conf'))).toMatchObject({ ok: true });
    expect(await checkConfig(repoPath('deploy/nats/auth.conf'), serverEnv(auth))).toMatchObject({ ok: true });
    expect(await checkConfig(repoPath('deploy/nats/spate.conf'), serverEnv(auth))).toMatchObject({ ok: true });
    expect(await checkConfig(repoPath('deploy/nats/compose-node.conf'), { ...serverEnv(auth), NATS_SERVER_NAME: 'nats-1' })).toMatchObject({ ok: true });
    // Each compose node must be named (JetStream needs unique server names) and every password
    // given: without any one of the variables the file does not parse, so no node runs open.
    for (const variable of ['NATS_SERVER_NAME', ...Object.keys(serverEnv(auth))]) {
      const missing = await new Promise<{ ok: boolean; output: string }>((resolve) => {
        const env: NodeJS.ProcessEnv = { ...process.env, ...serverEnv(auth), NATS_SERVER_NAME: 'nats-1' };
        delete env[variable];
        execFile(NATS_BIN, ['-t', '-c', repoPath('deploy/nats/compose-node.conf')], { env }, (err, stdout, stderr) => resolve({ ok: err === null, output: `${stdout}${stderr}` }));
      });
      expect(missing.ok, variable).toBe(false);
      expect(missing.output, variable).toContain(variable);
    }

    const dir = tempDir();
    const single = join(dir, 'single.conf');
    writeFileSync(single, natsConfigText({ dir, port: 4222, monitorPort: 8222, serverName: 'spate-n1', auth }));
    expect(await checkConfig(single, natsServerEnv(auth))).toMatchObject({ ok: true });
    const clustered = join(dir, 'clustered.conf');
    writeFileSync(
      clustered,
      natsConfigText({ dir, port: 4223, monitorPort: 8223, serverName: 'spate-n2', cluster: { name: 'spate', port: 6223, routePorts: [6222, 6224] }, auth }),
    );
    expect(await checkConfig(clustered, natsServerEnv(auth))).toMatchObject({ ok: true });
    expect(readFileSync(clustered, 'utf8')).toContain(`nats-route://spate-route:${auth.routePassword}@127.0.0.1:6222`);
  });

  it('nats config - auth.conf has a user for every role and the operator, each role limited by its own permissions', () => {
    const users = natsAuthUsers();
    expect(users.map((u) => u.user).sort()).toEqual(Object.values(NATS_USERS).sort());
    for (const [role, user] of Object.entries(NATS_USERS)) {
      const entry = users.find((u) => u.user === user)!;
      expect(entry.passwordVariable, user).toBe(`SPATE_NATS_${role.toUpperCase()}_PASSWORD`);
      if (role === 'operator') expect(entry.permissions, user).toBeUndefined();
      else expect(entry.permissions, user).toBe(`SPATE_${role.toUpperCase()}_PERMISSIONS`);
    }
    // No user may connect without a password, and none is the default for anonymous connections.
    expect(readRepoFile('deploy/nats/auth.conf')).not.toMatch(/^\s*no_auth_user/m);
  });

  it('nats config - the launcher and test kit copy base.conf into every node config', () => {
    const base = readFileSync(join(natsConfigDir(), 'base.conf'), 'utf8').trimEnd();
    expect(natsConfigDir()).toBe(repoPath('deploy/nats/'));
    const text = natsConfigText({ dir: '/data', port: 1, monitorPort: 2, serverName: 'n', auth: generateNatsServerAuth() });
    expect(text).toContain(base);
    expect(text).toContain(readFileSync(join(natsConfigDir(), 'auth.conf'), 'utf8').trimEnd());
    // Node settings come after the base, so they win where both set a key.
    expect(text.indexOf('server_name')).toBeGreaterThan(text.indexOf(base));
    expect(base).not.toMatch(/^\s*include\b/m);
  });

  it('nats config - a launcher node runs with base.conf max_payload (8 MiB) and max_pending (256 MiB); options override each', async () => {
    await using plain = await startNats();
    expect(await varz(plain.node.monitorUrl)).toMatchObject({ max_payload: DEFAULT_MAX_PAYLOAD, max_pending: 256 * MiB });
    expect(DEFAULT_MAX_PAYLOAD).toBe(8 * MiB);
    await using small = await startNats({ maxPayload: MiB });
    expect(await varz(small.node.monitorUrl)).toMatchObject({ max_payload: MiB, max_pending: 256 * MiB });
    await using tight = await startNats({ maxPayload: MiB, maxPending: 2 * MiB });
    expect(await varz(tight.node.monitorUrl)).toMatchObject({ max_payload: MiB, max_pending: 2 * MiB });
  });

  it('nats config - compose-node.conf forms a 3-node JetStream cluster named spate that keeps an R3 stream', async () => {
    const dir = tempDir();
    // The compose files, as compose mounts them; each node's file includes compose-node.conf and
    // moves the client and monitoring ports to free loopback ones and the store out of /data (the
    // jetstream block there holds nothing else). The cluster's listen address and routes come from
    // flags: the compose hostnames nats-1..3 resolve only there.
    for (const f of ['base.conf', 'auth.conf', 'spate.conf', 'compose-node.conf']) copyFileSync(repoPath(`deploy/nats/${f}`), join(dir, f));
    const auth = generateNatsServerAuth();
    const nodes = await Promise.all(
      [1, 2, 3].map(async (i) => ({ i, port: await freePort(), monitor: await freePort(), route: await freePort() })),
    );
    for (const n of nodes) {
      const file = join(dir, `nats-${n.i}.conf`);
      const store = join(dir, `store-${n.i}`);
      writeFileSync(
        file,
        `include "compose-node.conf"\nlisten: "127.0.0.1:${n.port}"\nhttp: "127.0.0.1:${n.monitor}"\njetstream { store_dir: ${JSON.stringify(store)} }\n`,
      );
      // As compose.yaml's command gives them: with the route user's credentials.
      const routes = nodes.filter((o) => o !== n).map((o) => `nats-route://spate-route:${auth.routePassword}@127.0.0.1:${o.route}`).join(',');
      startServer(['-c', file, '--cluster', `nats://127.0.0.1:${n.route}`, '--routes', routes], { ...serverEnv(auth), NATS_SERVER_NAME: `nats-${n.i}` }, join(dir, `nats-${n.i}.log`));
    }
    const monitors = nodes.map((n) => `http://127.0.0.1:${n.monitor}`);
    await Promise.all(monitors.map(healthy));
    await waitForJetStreamLeader(monitors);

    const first = await varz(monitors[0]!);
    expect(first).toMatchObject({ server_name: 'nats-1', max_payload: 8 * MiB, max_pending: 256 * MiB });
    expect((first.cluster as { name?: string }).name).toBe('spate');

    const urls = nodes.map((n) => `nats://127.0.0.1:${n.port}`).join(',');
    await expect(connectNats(urls, 'anonymous')).rejects.toThrow(/refused no credentials/);
    const nc = await connectNats(urls, 'deploy-test', { user: NATS_USERS.operator, pass: auth.passwords.operator });
    cleanups.push(() => nc.close());
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.add({ name: 'R3CHECK', subjects: ['r3check.>'], num_replicas: 3 });
    expect(info.config.num_replicas).toBe(3);
    await jetstream(nc).publish('r3check.1', 'x');
    await waitFor('stream replicated to all three nodes', async () => {
      const s = await jsm.streams.info('R3CHECK');
      return s.cluster?.leader !== undefined && (s.cluster.replicas ?? []).filter((r) => r.current).length === 2;
    });
  });

  it('nats config - the Helm values include spate.conf (base.conf, auth.conf) from where the ConfigMap spate-nats-base is mounted', async () => {
    const values = parseYaml('deploy/k8s/nats-values.yaml') as {
      config: { merge: Record<string, string>; cluster: { enabled: boolean; replicas: number }; jetstream: { enabled: boolean; fileStore: { enabled: boolean; pvc: { enabled: boolean } }; memoryStore: { enabled: boolean } } };
      container: { image: { repository: string; tag: string }; env: Record<string, unknown>; patch: { op: string; path: string; value: { name: string; mountPath: string } }[] };
      podTemplate: { patch: { op: string; path: string; value: { name: string; configMap: { name: string } } }[] };
    };
    const include = values.config.merge['$include'];
    expect(include).toBeDefined();
    const mount = values.container.patch.find((p) => p.path === '/volumeMounts/-')?.value;
    const volume = values.podTemplate.patch.find((p) => p.path === '/spec/volumes/-')?.value;
    expect(mount?.name).toBe(volume?.name);
    // The chart writes its config to /etc/nats-config/nats.conf; includes are relative to it.
    expect(posix.join('/etc/nats-config', include!)).toBe(posix.join(mount!.mountPath, 'spate.conf'));

    const kustomization = parseYaml('deploy/nats/kustomization.yaml') as {
      configMapGenerator: { name: string; files: string[]; options: { disableNameSuffixHash: boolean } }[];
    };
    const generated = kustomization.configMapGenerator.find((g) => g.name === volume?.configMap.name);
    // spate.conf and the files it includes, side by side (includes are relative to it).
    expect(generated?.files.sort()).toEqual(['auth.conf', 'base.conf', 'spate.conf']);
    expect(posix.basename(include!)).toBe('spate.conf');
    expect(generated?.options.disableNameSuffixHash).toBe(true);

    // The shape of what the chart renders (server name, ports, cluster, JetStream with no memory
    // store), with the include where the values put it, parses with the real server.
    const root = tempDir();
    mkdirSync(join(root, 'etc/nats-config'), { recursive: true });
    mkdirSync(join(root, mount!.mountPath.replace(/^\//, '')), { recursive: true });
    for (const f of generated!.files) copyFileSync(repoPath(`deploy/nats/${f}`), join(root, mount!.mountPath.replace(/^\//, ''), f));
    writeFileSync(
      join(root, 'etc/nats-config/nats.conf'),
      [
        `include ${include};`,
        'server_name: nats-0',
        'port: 4222',
        'http_port: 8222',
        'cluster { name: nats, port: 6222, no_advertise: true, routes: [nats://nats-0.nats-headless:6222, nats://nats-1.nats-headless:6222, nats://nats-2.nats-headless:6222] }',
        'jetstream { max_memory_store: 0, store_dir: /data, max_file_store: 50GB }',
        '',
      ].join('\n'),
    );
    // With the environment the values give the container (Secret values as placeholders).
    const containerEnv = Object.fromEntries(Object.keys(values.container.env).map((k) => [k, k === 'GOMEMLIMIT' ? values.container.env[k] as string : 'p4ssw0rdFromSecret']));
    expect(await checkConfig(join(root, 'etc/nats-config/nats.conf'), containerEnv)).toMatchObject({ ok: true });

    expect(values.config.cluster).toMatchObject({ enabled: true, replicas: 3 });
    expect(values.config.jetstream).toMatchObject({ enabled: true, fileStore: { enabled: true, pvc: { enabled: true } }, memoryStore: { enabled: false } });
    // The server version the suite runs against is the one the chart runs.
    expect(values.container.image).toMatchObject({ repository: 'nats', tag: `${localNatsVersion()}-alpine` });
  });

  it('nats config - without JetStream memory storage (as the Helm values run it) ordered consumers and KV watches work', async () => {
    const dir = tempDir();
    copyFileSync(repoPath('deploy/nats/base.conf'), join(dir, 'base.conf'));
    const port = await freePort();
    const monitor = await freePort();
    const file = join(dir, 'node.conf');
    writeFileSync(
      file,
      `include "base.conf"\nlisten: "127.0.0.1:${port}"\nhttp: "127.0.0.1:${monitor}"\njetstream { store_dir: ${JSON.stringify(dir)}, max_memory_store: 0 }\n`,
    );
    startServer(['-c', file], {}, join(dir, 'nats.log'));
    await healthy(`http://127.0.0.1:${monitor}`);
    const nc = await connectNats(`nats://127.0.0.1:${port}`, 'deploy-test');
    cleanups.push(() => nc.close());
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'EVENTS', subjects: ['events.>'] });
    await jetstream(nc).publish('events.1.0', 'hello');
    // Workers read each shard with an ordered consumer (one filter subject).
    const consumer = await jetstream(nc).consumers.get('EVENTS', { filter_subjects: 'events.*.0' });
    expect((await consumer.next({ expires: 5_000 }))?.string()).toBe('hello');
    // Ingest nodes watch the spate-projects bucket.
    const kv = await new Kvm(nc).create('spate-projects', { history: 1 });
    await kv.put('phc_key', '{"projectId":1}');
    const watch = await kv.watch();
    for await (const entry of watch) {
      expect(entry.key).toBe('phc_key');
      break;
    }
    expect(readRepoFile('deploy/k8s/nats-values.yaml')).toContain('memoryStore:');
  });
});
