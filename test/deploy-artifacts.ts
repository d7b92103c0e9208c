// What the deployment artefacts (deploy/docker, compose, k8s, observability) may refer to: each
// deployable's entry file, its settings, its port and its health paths, taken from the code. The
// checks beside those artefacts (deploy/**/*.test.ts) hold every file to these facts.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DockerfileParser } from 'dockerfile-ast';
import { parseAllDocuments, parse as parseYamlText } from 'yaml';
import { adminConfigDefinition } from '../admin/index.js';
import { ingestConfigDefinition } from '../ingest/index.js';
import { workerConfigDefinition } from '../workers/index.js';
import { ConfigError, loadConfig, natsAuthSettings, NATS_USERS, type ConfigDefinition, type NatsRole } from '../lib/index.js';

export const repoRoot = fileURLToPath(new URL('../', import.meta.url));

export function repoPath(relative: string): string {
  return fileURLToPath(new URL(relative, new URL('../', import.meta.url)));
}

export function readRepoFile(relative: string): string {
  return readFileSync(repoPath(relative), 'utf8');
}

/** One YAML document; `merge` resolves `<<: *anchor` as Docker Compose does. */
export function parseYaml(relative: string): unknown {
  return parseYamlText(readRepoFile(relative), { merge: true, strict: true, prettyErrors: true });
}

/** Every document of a multi-document YAML file; throws on the first syntax error. */
export function parseYamlDocuments(relative: string): unknown[] {
  return parseAllDocuments(readRepoFile(relative), { merge: true, strict: true, prettyErrors: true }).map((doc) => {
    const [error] = doc.errors;
    if (error) throw error;
    return doc.toJS() as unknown;
  });
}

/** Read by lib/logger.ts in every process (createLogger's default level). */
const LOGGER_SETTINGS = ['LOG_LEVEL'];

/**
 * What `spate admin …` reads: DATABASE_URL and NATS_URL (admin/cli.ts, databaseUrlFrom and
 * natsUrlFrom), the admin server's NATS credentials settings (natsAuthFrom), SPATE_DATA_DIR
 * (lib/cluster-file.ts, dataDir).
 */
export const CLI_SETTINGS = [
  'DATABASE_URL',
  'NATS_URL',
  ...Object.values(natsAuthSettings('admin')).map((s) => s.env),
  'SPATE_DATA_DIR',
  'PROJECTS_KV_REPLICAS',
];

export type DeployableName = 'ingest' | 'admin' | 'workers' | 'cli';

export interface Deployable {
  name: DeployableName;
  /** Source of the entry file; the build writes it to dist/ with .js (tsconfig.build.json). */
  source: string;
  settings: ReadonlySet<string>;
  definition?: ConfigDefinition;
  /** The setting that holds the HTTP port, and its default. */
  port?: { setting: string; default: number };
  health?: { live: string; ready: string };
}

export const DEPLOYABLES: Record<DeployableName, Deployable> = {
  ingest: {
    name: 'ingest',
    source: 'ingest/main.ts',
    settings: new Set([...Object.values(ingestConfigDefinition).map((s) => s.env), ...LOGGER_SETTINGS]),
    definition: ingestConfigDefinition,
    port: { setting: 'CAPTURE_PORT', default: defaultOf(ingestConfigDefinition, 'CAPTURE_PORT') },
    health: { live: '/_health', ready: '/_ready' },
  },
  admin: {
    name: 'admin',
    source: 'admin/main.ts',
    settings: new Set(Object.values(adminConfigDefinition).map((s) => s.env)),
    definition: adminConfigDefinition,
    port: { setting: 'ADMIN_PORT', default: defaultOf(adminConfigDefinition, 'ADMIN_PORT') },
    health: { live: '/_health', ready: '/_ready' },
  },
  workers: {
    name: 'workers',
    source: 'workers/main.ts',
    settings: new Set([...Object.values(workerConfigDefinition).map((s) => s.env), ...LOGGER_SETTINGS]),
    definition: workerConfigDefinition,
    // 0 by default (any free port): a container must set it.
    port: { setting: 'WORKER_METRICS_PORT', default: defaultOf(workerConfigDefinition, 'WORKER_METRICS_PORT') },
    health: { live: '/_health', ready: '/_ready' },
  },
  cli: {
    name: 'cli',
    source: 'cli/spate.ts',
    settings: new Set(CLI_SETTINGS),
  },
};

function defaultOf(definition: ConfigDefinition, env: string): number {
  const setting = Object.values(definition).find((s) => s.env === env);
  const parsed = setting?.schema.safeParse(undefined);
  if (!parsed?.success || typeof parsed.data !== 'number') throw new Error(`${env} has no numeric default`);
  return parsed.data;
}

/** `node dist/<x>.js …` → the deployable whose entry that is; undefined for anything else. */
export function deployableOfCommand(command: readonly string[]): Deployable | undefined {
  if (command[0] !== 'node') return undefined;
  return Object.values(DEPLOYABLES).find((d) => command[1] === builtPath(d.source));
}

/** Where tsc -p tsconfig.build.json writes a source file (outDir dist, rootDir the repo). */
export function builtPath(source: string): string {
  return `dist/${source.replace(/\.ts$/, '.js')}`;
}

/** Problems with an environment given to a deployable: unknown names, values its config refuses. */
export function envProblems(deployable: Deployable, env: Readonly<Record<string, string>>): string[] {
  const problems = Object.keys(env)
    .filter((name) => !deployable.settings.has(name))
    .map((name) => `${name} is no setting of ${deployable.name}`);
  if (deployable.definition) {
    try {
      loadConfig(deployable.definition, env);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems.push(...err.problems);
    }
  }
  return problems;
}

/** The port the deployable listens on with this environment. */
export function effectivePort(deployable: Deployable, env: Readonly<Record<string, string>>): number | undefined {
  if (!deployable.port) return undefined;
  const raw = env[deployable.port.setting];
  return raw === undefined || raw === '' ? deployable.port.default : Number(raw);
}

/** Settings every NATS stream and KV bucket replica count is taken from, per deployable. */
export const REPLICA_SETTINGS: Partial<Record<DeployableName, string>> = {
  ingest: 'STREAM_REPLICAS',
  admin: 'PROJECTS_KV_REPLICAS',
  workers: 'NATS_REPLICAS',
};

/** The nats-server version the test kit runs (`nats-server --version`: "nats-server: v2.15.1"). */
export function localNatsVersion(): string {
  const version = execFileSync(process.env.NATS_SERVER_BIN ?? 'nats-server', ['--version'], { encoding: 'utf8' });
  const m = /v(\d+\.\d+\.\d+)/.exec(version);
  if (!m) throw new Error(`unexpected nats-server --version output: ${version}`);
  return m[1]!;
}

/** Placeholder for values Kubernetes fills in at run time (secretKeyRef, fieldRef). */
export function runtimeValue(name: string): string {
  if (name === 'DATABASE_URL') return 'postgres://user:secret@database:5432/spate';
  if (name === 'SPATE_SECRET_KEY') return Buffer.alloc(32, 7).toString('base64');
  return 'runtime-value';
}

/** The environment deploy/docker/Dockerfile gives every container: the ENVs of its last stage. */
export function imageEnv(): Record<string, string> {
  const dockerfile = DockerfileParser.parse(readRepoFile('deploy/docker/Dockerfile'));
  const lastFrom = dockerfile.getFROMs().at(-1)!.getRange().start.line;
  const env: Record<string, string> = {};
  for (const e of dockerfile.getENVs()) {
    if (e.getRange().start.line < lastFrom) continue;
    for (const p of e.getProperties()) env[p.getName()] = p.getValue() ?? '';
  }
  return env;
}

/** The NATS role each deployable connects as (the CLI acts for the admin server). */
export const NATS_ROLE_OF: Record<DeployableName, NatsRole> = { ingest: 'ingest', admin: 'admin', workers: 'worker', cli: 'admin' };

export interface NatsAuthUser {
  user: string;
  /** The environment variable nats-server reads the password from. */
  passwordVariable: string;
  /** The name of the permissions variable, or undefined for full access. */
  permissions: string | undefined;
}

/** The users of deploy/nats/auth.conf, as its `authorization { users: [...] }` lists them. */
export function natsAuthUsers(): NatsAuthUser[] {
  const conf = readRepoFile('deploy/nats/auth.conf');
  const block = /^authorization \{([\s\S]*?)^\}/m.exec(conf)?.[1] ?? '';
  return [...block.matchAll(/\{ user: "([\w-]+)", password: \$(\w+)(?:, permissions: \$(\w+))? \}/g)].map((m) => ({
    user: m[1]!,
    passwordVariable: m[2]!,
    permissions: m[3],
  }));
}

/** The password variable of a role's (or the operator's) user in deploy/nats/auth.conf. */
export function natsPasswordVariable(user: NatsRole | 'operator'): string {
  const found = natsAuthUsers().find((u) => u.user === NATS_USERS[user]);
  if (!found) throw new Error(`deploy/nats/auth.conf has no user ${NATS_USERS[user]}`);
  return found.passwordVariable;
}
