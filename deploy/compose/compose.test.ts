// deploy/compose/compose.yaml and its load balancer config, checked statically (Docker cannot run
// here): every Spate service runs a built entry file with settings its deployable has, on the
// ports those settings give, against the NATS nodes and the database the file defines.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generateSecretKey, NATS_USERS, parseSecretKey } from '../../lib/index.js';
import {
  DEPLOYABLES,
  deployableOfCommand,
  effectivePort,
  envProblems,
  imageEnv,
  localNatsVersion,
  parseYaml,
  readRepoFile,
  NATS_ROLE_OF,
  natsAuthUsers,
  natsPasswordVariable,
  REPLICA_SETTINGS,
  repoPath,
  repoRoot,
  type Deployable,
} from '../../test/deploy-artifacts.js';

const COMPOSE = 'deploy/compose/compose.yaml';
const composeDir = repoPath('deploy/compose/');

interface Service {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: string[];
  environment?: Record<string, string | number | boolean>;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }> | string[];
  healthcheck?: { test: string[] };
  deploy?: { replicas?: number };
  profiles?: string[];
  hostname?: string;
}

const compose = parseYaml(COMPOSE) as { name: string; services: Record<string, Service>; volumes: Record<string, unknown> };
const services = compose.services;

/** Compose's `${VAR:-default}` with nothing set: the default; a required `${VAR:?…}`: `<VAR>`. */
function interpolate(value: string): string {
  return value
    .replace(/\$\{(\w+):-([^}]*)\}/g, (_m, _name: string, def: string) => def)
    .replace(/\$\{(\w+):\?[^}]*\}/g, (_m, name: string) => (name === 'SPATE_SECRET_KEY' ? generateSecretKey() : `<${name}>`));
}

/** The variable a value takes from the environment or .env, required (`${VAR:?…}`) or not. */
function variableOf(value: string | undefined): string | undefined {
  return /^\$\{(\w+)(?::[?-][^}]*)?\}$/.exec(value ?? '')?.[1];
}

function envOf(service: Service): Record<string, string> {
  return Object.fromEntries(Object.entries(service.environment ?? {}).map(([k, v]) => [k, interpolate(String(v))]));
}

const spateServices = Object.entries(services).filter(([, s]) => s.build !== undefined);
const deployableOf = (name: string): Deployable => {
  const d = deployableOfCommand(services[name]?.command ?? []);
  if (!d) throw new Error(`${name} runs no deployable`);
  return d;
};
const natsServices = Object.keys(services).filter((n) => /^nats-\d+$/.test(n));

/** host:container pairs of a service's published ports. */
const published = (s: Service) => (s.ports ?? []).map((p) => p.split(':').map(Number) as [number, number]);

describe('docker compose cluster', () => {
  it('compose - runs 3 NATS nodes, PostgreSQL, admin, a bootstrap, ingest ×2 behind one published port and workers ×2', () => {
    expect(compose.name).toBe('spate');
    expect(natsServices).toEqual(['nats-1', 'nats-2', 'nats-3']);
    expect(Object.keys(services)).toEqual(expect.arrayContaining(['postgres', 'admin', 'bootstrap', 'ingest', 'ingest-lb', 'workers']));
    expect(services.ingest?.deploy?.replicas).toBe(2);
    expect(services.workers?.deploy?.replicas).toBe(2);
    expect(deployableOf('ingest').name).toBe('ingest');
    expect(deployableOf('workers').name).toBe('workers');
    expect(deployableOf('admin').name).toBe('admin');
    expect(services.bootstrap?.command).toEqual(['node', 'dist/cli/spate.js', 'admin', 'bootstrap']);
    // Replicas share nothing fixed: only the load balancer and admin publish ports.
    const publishing = Object.entries(services).filter(([, s]) => s.ports && !s.profiles).map(([n]) => n);
    expect(publishing.sort()).toEqual(['admin', 'ingest-lb']);
    expect(published(services['ingest-lb']!)).toEqual([[8000, 8000]]);
    expect(published(services.admin!)).toEqual([[8010, effectivePort(DEPLOYABLES.admin, { ...imageEnv(), ...envOf(services.admin!) })]]);
  });

  it('compose - Spate services build deploy/docker/Dockerfile from the repository and start entry files the build makes', () => {
    expect(spateServices.map(([n]) => n).sort()).toEqual(['admin', 'bootstrap', 'ingest', 'workers']);
    for (const [name, s] of spateServices) {
      expect(join(composeDir, s.build!.context), name).toBe(repoRoot.replace(/\/$/, ''));
      expect(existsSync(join(repoRoot, s.build!.dockerfile)), name).toBe(true);
      expect(s.build!.dockerfile).toBe('deploy/docker/Dockerfile');
      expect(s.image, name).toBe('${SPATE_IMAGE:-spate:local}');
      expect(deployableOfCommand(s.command ?? []), `${name}: ${s.command?.join(' ')}`).toBeDefined();
    }
  });

  it('compose - every variable set for a Spate service is a valid setting of the deployable it runs', () => {
    for (const [name, s] of spateServices) {
      expect(envProblems(deployableOf(name), envOf(s)), name).toEqual([]);
    }
  });

  it('compose - health checks probe each deployable on its own port and health path', () => {
    for (const [name, s] of spateServices) {
      if (name === 'bootstrap') continue;
      const d = deployableOf(name);
      const test = s.healthcheck?.test ?? [];
      expect(test.slice(0, 3), name).toEqual(['CMD', 'node', 'dist/deploy/docker/healthcheck.js']);
      const url = new URL(test[3]!);
      expect(Number(url.port), name).toBe(effectivePort(d, { ...imageEnv(), ...envOf(s) }));
      expect(url.port, name).not.toBe('0');
      expect([d.health!.live, d.health!.ready], name).toContain(url.pathname);
    }
    expect(existsSync(repoPath('deploy/docker/healthcheck.ts'))).toBe(true);
    // Whatever waits for a service to be healthy waits for one that has a health check.
    for (const [name, s] of Object.entries(services)) {
      if (Array.isArray(s.depends_on) || !s.depends_on) continue;
      for (const [dep, { condition }] of Object.entries(s.depends_on)) {
        expect(services[dep], `${name} depends on ${dep}`).toBeDefined();
        if (condition === 'service_healthy') expect(services[dep]?.healthcheck, `${name} waits for ${dep} to be healthy`).toBeDefined();
      }
    }
  });

  it('compose - NATS nodes run deploy/nats/compose-node.conf, each named, and Spate services reach all three at R3', () => {
    const conf = readRepoFile('deploy/nats/compose-node.conf');
    const routes = [...conf.matchAll(/"nats-route:\/\/([\w-]+):(\d+)"/g)].map((m) => `${m[1]}:${m[2]}`);
    const clusterPort = /cluster \{[\s\S]*?listen: "0\.0\.0\.0:(\d+)"/.exec(conf)?.[1];
    const clientPort = /^listen: "0\.0\.0\.0:(\d+)"/m.exec(conf)?.[1];
    expect(routes.sort()).toEqual(natsServices.map((n) => `${n}:${clusterPort}`));
    const routeUser = /authorization \{\s*user: "([\w-]+)"\s*password: \$(\w+)/.exec(conf);
    expect(routeUser?.slice(1)).toEqual(['spate-route', 'SPATE_NATS_ROUTE_PASSWORD']);
    for (const name of natsServices) {
      const s = services[name]!;
      expect(s.image).toBe(`nats:${localNatsVersion()}-alpine`);
      expect(s.hostname).toBe(name);
      // Its name, every user's password (required: compose refuses to start without one), the route password.
      const variables = [...natsAuthUsers().map((u) => u.passwordVariable), 'SPATE_NATS_ROUTE_PASSWORD'];
      expect(Object.keys(s.environment ?? {}).sort()).toEqual(['NATS_SERVER_NAME', ...variables].sort());
      expect(envOf(s).NATS_SERVER_NAME).toBe(name);
      for (const v of variables) expect(String(s.environment![v]), `${name} ${v}`).toMatch(new RegExp(`^\\$\\{${v}:\\?[^}]+\\}$`));
      const mount = s.volumes?.find((v) => v.startsWith('../nats:'));
      const [, target] = mount!.split(':');
      expect(posix.join(composeDir, '../nats')).toBe(repoPath('deploy/nats'));
      // The routes of compose-node.conf again, with the route user's credentials.
      const credentialed = natsServices.map((n) => `nats-route://spate-route:\${SPATE_NATS_ROUTE_PASSWORD}@${n}:${clusterPort}`).join(',');
      expect(s.command).toEqual(['nats-server', '--config', posix.join(target!, 'compose-node.conf'), '--routes', credentialed]);
      // Each node keeps its own JetStream store (compose-node.conf: store_dir "/data").
      expect(s.volumes).toContain(`${name}:/data`);
      expect(compose.volumes).toHaveProperty(name);
    }
    const natsUrl = natsServices.map((n) => `nats://${n}:${clientPort}`).join(',');
    for (const [name, s] of spateServices) {
      const env = envOf(s);
      expect(env.NATS_URL, name).toBe(natsUrl);
      const replicas = REPLICA_SETTINGS[deployableOf(name).name];
      if (replicas) expect(env[replicas], `${name} ${replicas}`).toBe(String(natsServices.length));
    }
    // Ingest and workers must agree on the shard count and stream partitions (each refuses to start otherwise).
    expect(envOf(services.ingest!).SHARD_COUNT).toBe(envOf(services.workers!).SHARD_COUNT);
    expect(envOf(services.ingest!).STREAM_PARTITIONS).toBe(envOf(services.workers!).STREAM_PARTITIONS);
  });

  it('compose - each Spate service connects to NATS as its role\'s user with the password the NATS nodes give that user', () => {
    const users = natsAuthUsers();
    for (const [name, s] of spateServices) {
      const role = NATS_ROLE_OF[deployableOf(name).name];
      const env = s.environment ?? {};
      expect(env.NATS_USER, name).toBe(NATS_USERS[role]);
      expect(users.map((u) => u.user), name).toContain(env.NATS_USER);
      expect(variableOf(String(env.NATS_PASSWORD)), name).toBe(natsPasswordVariable(role));
      expect(Object.keys(services['nats-1']!.environment ?? {}), name).toContain(natsPasswordVariable(role));
    }
    // deploy/compose/new-env.sh writes every variable compose requires, as auth.conf needs them, readable by its owner only.
    const dir = mkdtempSync(join(tmpdir(), 'spate-compose-env-'));
    try {
      copyFileSync(repoPath('deploy/compose/new-env.sh'), join(dir, 'new-env.sh'));
      execFileSync('sh', [join(dir, 'new-env.sh')], { stdio: 'ignore' });
      const written = Object.fromEntries(readFileSync(join(dir, '.env'), 'utf8').trim().split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
      const required = [...readRepoFile(COMPOSE).matchAll(/\$\{(\w+):\?/g)].map((m) => m[1]!);
      expect(Object.keys(written).sort()).toEqual([...new Set(required)].sort());
      for (const [name, value] of Object.entries(written)) {
        if (name === 'SPATE_SECRET_KEY') expect(parseSecretKey(value)).toHaveLength(32);
        else expect(value, name).toMatch(/^[A-Za-z][A-Za-z0-9]{31}$/);
      }
      expect(statSync(join(dir, '.env')).mode & 0o777).toBe(0o600);
      // It never overwrites secrets already in use.
      expect(() => execFileSync('sh', [join(dir, 'new-env.sh')], { stdio: 'ignore' })).toThrow();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(readRepoFile('.gitignore')).toContain('deploy/compose/.env');
  });

  it('compose - the admin server and the workers share one SPATE_SECRET_KEY, required from .env', () => {
    for (const name of ['admin', 'workers']) expect(services[name]?.environment?.SPATE_SECRET_KEY, name).toBe('${SPATE_SECRET_KEY:?run deploy/compose/new-env.sh}');
    for (const name of ['ingest', 'bootstrap']) expect(services[name]?.environment?.SPATE_SECRET_KEY, `${name} needs no key`).toBeUndefined();
  });

  it('compose - Spate services reach the PostgreSQL service with its user and database', () => {
    const pg = envOf(services.postgres!);
    for (const [name, s] of spateServices) {
      const raw = envOf(s).DATABASE_URL;
      if (raw === undefined) continue;
      const url = new URL(raw);
      expect([url.hostname, url.port, url.username, url.password, url.pathname], name).toEqual([
        'postgres',
        '5432',
        pg.POSTGRES_USER,
        pg.POSTGRES_PASSWORD,
        `/${pg.POSTGRES_DB}`,
      ]);
    }
  });

  it('compose - the load balancer sends its port to every ingest replica on the capture port and checks /_ready', () => {
    const cfg = readRepoFile('deploy/compose/haproxy.cfg');
    const lb = services['ingest-lb']!;
    expect(lb.volumes).toContain('./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro');
    expect(/^\s*bind :(\d+)$/m.exec(cfg)?.[1]).toBe(String(published(lb)[0]![1]));
    const ingestPort = effectivePort(DEPLOYABLES.ingest, { ...imageEnv(), ...envOf(services.ingest!) });
    expect(/^\s*server-template \S+ (\d+) ingest:(\d+)/m.exec(cfg)?.slice(1).map(Number)).toEqual([16, ingestPort]);
    expect(cfg).toMatch(/^\s*http-check send meth GET uri \/_ready$/m);
    // TRUST_PROXY=true is safe only because the balancer replaces whatever X-Forwarded-For a client sent.
    expect(envOf(services.ingest!).TRUST_PROXY).toBe('true');
    expect(cfg).toMatch(/^\s*http-request set-header X-Forwarded-For %\[src\]$/m);
  });

  // `npm run setup` installs haproxy (Debian puts it in /usr/sbin, which a non-root PATH may lack);
  // the real parser checks the file, and a machine without it fails here rather than skipping.
  it('compose - haproxy accepts haproxy.cfg (haproxy -c)', () => {
    const haproxy = ['haproxy', '/usr/sbin/haproxy'].find((bin) => {
      try {
        execFileSync(bin, ['-v'], { stdio: 'ignore' });
        return true;
      } catch {
        return false;
      }
    });
    if (!haproxy) throw new Error('haproxy is not installed: run `npm run setup`');
    const out = execFileSync(haproxy, ['-c', '-f', repoPath('deploy/compose/haproxy.cfg')], { encoding: 'utf8' });
    expect(out).toContain('Configuration file is valid');
  });

  it('compose - observability services mount the Prometheus config and the Grafana dashboards that exist', () => {
    for (const name of ['prometheus', 'grafana', 'nats-exporter-1', 'nats-exporter-2', 'nats-exporter-3']) {
      expect(services[name]?.profiles, name).toEqual(['observability']);
      for (const volume of services[name]?.volumes ?? []) {
        const [source] = volume.split(':');
        if (!source!.startsWith('.')) continue;
        expect(existsSync(join(composeDir, source!)), `${name}: ${source}`).toBe(true);
      }
    }
    for (const [i, name] of natsServices.entries()) {
      expect(services[`nats-exporter-${i + 1}`]?.command?.at(-1)).toBe(`http://${name}:8222/`);
    }
    expect(dirname(COMPOSE)).toBe('deploy/compose');
  });
});
