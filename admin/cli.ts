// `spate admin …`: operator commands that work on the admin database directly (ARCHITECTURE.md,
// "CLI"). They find it through DATABASE_URL, else $SPATE_DATA_DIR/cluster.json, and apply
// pending migrations first, so they work on a fresh database too.
import { parseArgs } from 'node:util';
import pg from 'pg';
import { z } from 'zod';
import {
  clusterFilePath,
  createLogger,
  dataDir,
  isUuid,
  loadConfig,
  natsAuthOf,
  natsAuthSettings,
  readClusterFile,
  writeClusterFile,
  type NatsAuth,
} from '../lib/index.js';
import { parseScopes } from './auth/scopes.js';
import { bootstrapCluster } from './bootstrap.js';
import { adminConfigHelp, projectLimitSettingsFromEnv } from './config.js';
import { migrate } from './db/migrate.js';
import { inTransaction } from './db/pool.js';
import { normalizeEmail } from './http/validation.js';
import { createPersonalApiKey } from './store/keys.js';
import { countOwners, findMemberByUserId, upsertMembership } from './store/members.js';
import { PLUGINS_ACCESS } from './store/organizations.js';
import { ensureUser, findUserByEmail } from './store/users.js';

export const ADMIN_USAGE = `usage:
  spate admin bootstrap [--email E]
      first-run set-up: a user, an organization, a project and a personal API key with scope '*'
      (idempotent; prints them as JSON and records them in $SPATE_DATA_DIR/cluster.json if the
      file exists and names this database)
  spate admin user --email E [--organization ORG_ID --level 1|8|15]
      creates the user if missing and adds or updates that membership (level 1 member, 8 admin,
      15 owner; default 1); prints the user's uuid as the last line
  spate admin key --email E --scopes SCOPE[,SCOPE…]|'*' [--organizations ORG_ID[,…]]
      creates a personal API key for that user, optionally limited to some organizations;
      prints the key as the last line
  spate admin organization --id ORG_ID --plugins-access-level 0|3|6|9
      sets what the organization may do with plugins: 0 nothing, 3 configure the plugins it
      sees (the default of new organizations), 6 also install its own (their code runs in the
      shared workers), 9 also make them global (every organization sees them)

The database is DATABASE_URL, else databaseUrl of $SPATE_DATA_DIR/cluster.json.`;

export interface CliIo {
  out: (line: string) => void;
  err: (line: string) => void;
  env: Readonly<Record<string, string | undefined>>;
}

const defaultIo: CliIo = {
  out: (line) => process.stdout.write(line + '\n'),
  err: (line) => process.stderr.write(line + '\n'),
  env: process.env,
};

class UsageError extends Error {
  override name = 'UsageError';
}

const emailSchema = z.email();

function requireEmail(value: string | undefined): string {
  if (value === undefined) throw new UsageError('--email is required');
  if (!emailSchema.safeParse(value).success) throw new UsageError(`not an email address: ${value}`);
  return normalizeEmail(value);
}

function databaseUrlFrom(env: CliIo['env']): string {
  if (env.DATABASE_URL) return env.DATABASE_URL;
  const path = clusterFilePath(dataDir(env));
  let url: string | undefined;
  try {
    url = readClusterFile(path).databaseUrl;
  } catch (err) {
    throw new Error(`set DATABASE_URL, or start the cluster (npm start) so that ${path} exists: ${(err as Error).message}`, { cause: err });
  }
  if (!url) throw new Error(`${path} has no databaseUrl; set DATABASE_URL`);
  return url;
}

function natsUrlFrom(env: CliIo['env']): string | undefined {
  if (env.NATS_URL) return env.NATS_URL;
  try {
    return readClusterFile(clusterFilePath(dataDir(env))).natsUrl;
  } catch {
    return undefined;
  }
}

/**
 * The admin server's NATS settings (NATS_USER, NATS_PASSWORD, …) when credentials are given;
 * otherwise the operator user of $SPATE_DATA_DIR/cluster.json, as for the URL.
 */
function natsAuthFrom(env: CliIo['env']): NatsAuth {
  const settings = loadConfig(natsAuthSettings('admin'), env);
  if (settings.natsPassword || settings.natsCreds) return natsAuthOf(settings);
  try {
    const cluster = readClusterFile(clusterFilePath(dataDir(env)));
    if (cluster.natsUser) return { ...natsAuthOf(settings), user: cluster.natsUser, pass: cluster.natsPassword, inboxPrefix: undefined };
  } catch {
    // no cluster file: connect with what the settings say (no credentials)
  }
  return natsAuthOf(settings);
}

async function withDatabase<T>(env: CliIo['env'], fn: (pool: pg.Pool) => Promise<T>): Promise<T> {
  const url = databaseUrlFrom(env);
  await migrate(url);
  const pool = new pg.Pool({ connectionString: url, max: 1, application_name: 'spate-admin-cli' });
  try {
    return await fn(pool);
  } finally {
    await pool.end();
  }
}

async function userCommand(args: string[], io: CliIo): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { email: { type: 'string' }, organization: { type: 'string' }, level: { type: 'string' } },
    strict: true,
  });
  const email = requireEmail(values.email);
  if (values.level !== undefined && values.organization === undefined) throw new UsageError('--level needs --organization');
  // Without --level a new membership is a member's and an existing one keeps its level.
  const requested = values.level === undefined ? undefined : Number(values.level);
  if (requested !== undefined && ![1, 8, 15].includes(requested)) throw new UsageError(`--level must be 1 (member), 8 (admin) or 15 (owner), not ${String(values.level)}`);
  const organization = values.organization;
  if (organization !== undefined && !isUuid(organization)) throw new UsageError(`--organization must be an organization id (uuid), not ${String(values.organization)}`);

  const user = await withDatabase(io.env, (pool) =>
    inTransaction(pool, async (db) => {
      const { user, created } = await ensureUser(db, email);
      io.out(created ? `created user ${user.email}` : `user ${user.email} exists`);
      if (organization !== undefined) {
        const org = await db.query<{ name: string }>('select name from organizations where id = $1 for no key update', [organization]);
        if (!org.rows[0]) throw new Error(`no organization ${organization}`);
        const current = await findMemberByUserId(db, organization, user.id);
        const level = requested ?? current?.level ?? 1;
        if (current?.level === 15 && level !== 15 && (await countOwners(db, organization)) <= 1) {
          throw new Error(`${user.email} is the only owner of ${org.rows[0].name}; make someone else owner first`);
        }
        await upsertMembership(db, organization, user.id, level);
        const name = { 1: 'member', 8: 'admin', 15: 'owner' }[level as 1 | 8 | 15];
        io.out(`${current ? 'updated' : 'added'} ${user.email} in ${org.rows[0].name} (${organization}) as ${name}`);
      }
      return user;
    }),
  );
  io.out(user.uuid);
}

async function keyCommand(args: string[], io: CliIo): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { email: { type: 'string' }, scopes: { type: 'string' }, organizations: { type: 'string' }, label: { type: 'string' } },
    strict: true,
  });
  const email = requireEmail(values.email);
  if (values.scopes === undefined) throw new UsageError("--scopes is required (e.g. organization:read,project:read or '*')");
  let scopes: string[];
  try {
    scopes = parseScopes(values.scopes);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  let organizations: string[] | null = null;
  if (values.organizations !== undefined) {
    organizations = [...new Set(values.organizations.split(',').map((s) => s.trim()).filter((s) => s !== ''))];
    const bad = organizations.filter((o) => !isUuid(o));
    if (organizations.length === 0 || bad.length > 0) throw new UsageError(`--organizations takes organization ids (uuids): ${bad.join(', ')}`);
  }

  const key = await withDatabase(io.env, (pool) =>
    inTransaction(pool, async (db) => {
      const user = await findUserByEmail(db, email);
      if (!user) throw new Error(`no user with email ${email}; create one with: spate admin user --email ${email}`);
      if (organizations) {
        const { rows } = await db.query<{ id: string }>('select id from organizations where id = any($1::uuid[])', [organizations]);
        const missing = organizations.filter((o) => !rows.some((r) => r.id === o.toLowerCase()));
        if (missing.length > 0) throw new Error(`no organization ${missing.join(', ')}`);
      }
      const created = await createPersonalApiKey(db, user.id, {
        scopes,
        scopedOrganizations: organizations,
        label: values.label ?? 'spate admin key',
      });
      io.out(`created a personal API key for ${user.email} with scopes ${scopes.join(',')}${organizations ? ` for organizations ${organizations.join(',')}` : ''}`);
      return created.key;
    }),
  );
  io.out(key);
}

async function organizationCommand(args: string[], io: CliIo): Promise<void> {
  const { values } = parseArgs({ args, options: { id: { type: 'string' }, 'plugins-access-level': { type: 'string' } }, strict: true });
  const id = values.id;
  if (id === undefined || !isUuid(id)) throw new UsageError(`--id must be an organization id (uuid), not ${String(id)}`);
  const raw = values['plugins-access-level'];
  if (raw === undefined) throw new UsageError('--plugins-access-level is required');
  const level = Number(raw);
  if (!(Object.values(PLUGINS_ACCESS) as number[]).includes(level)) {
    throw new UsageError(`--plugins-access-level must be 0, 3, 6 or 9, not ${raw}`);
  }
  await withDatabase(io.env, async (pool) => {
    const { rows } = await pool.query<{ name: string; before: number }>(
      `update organizations o set plugins_access_level = $2, updated_at = clock_timestamp()
       from (select plugins_access_level as before from organizations where id = $1 for update) b
       where o.id = $1 returning o.name, b.before`,
      [id, level],
    );
    if (!rows[0]) throw new Error(`no organization ${id}`);
    io.out(`${rows[0].name} (${id}): plugins_access_level ${rows[0].before} -> ${level}`);
  });
  io.out(String(level));
}

function kvReplicasFrom(env: NodeJS.ProcessEnv): number {
  const raw = env.PROJECTS_KV_REPLICAS;
  if (raw === undefined || raw === '') return 1;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`PROJECTS_KV_REPLICAS must be a positive integer (got ${JSON.stringify(raw)})`);
  return n;
}

async function bootstrapCommand(args: string[], io: CliIo): Promise<void> {
  const { values } = parseArgs({ args, options: { email: { type: 'string' } }, strict: true });
  const email = values.email === undefined ? undefined : requireEmail(values.email);
  const databaseUrl = databaseUrlFrom(io.env);
  const dir = dataDir(io.env);
  const result = await bootstrapCluster({
    databaseUrl,
    dataDir: dir,
    natsUrl: natsUrlFrom(io.env),
    natsAuth: natsAuthFrom(io.env),
    // On a 3-node cluster the project key bucket must be created at R3 if bootstrap creates it.
    kvReplicas: kvReplicasFrom(io.env),
    projectLimits: projectLimitSettingsFromEnv(io.env),
    email,
    // stdout carries the result only (JSON for scripts); failures surface as thrown errors.
    logger: createLogger('spate-admin', 'silent'),
  });
  // A running cluster's cluster.json learns the admin facts too (when it describes this database).
  const path = clusterFilePath(dir);
  let cluster: ReturnType<typeof readClusterFile> | undefined;
  try {
    cluster = readClusterFile(path);
  } catch {
    cluster = undefined;
  }
  if (cluster && (cluster.databaseUrl === undefined || cluster.databaseUrl === databaseUrl)) {
    writeClusterFile(
      {
        ...cluster,
        databaseUrl,
        organizationId: result.organizationId,
        projectId: result.projectId,
        projectApiKey: result.projectApiKey,
        personalApiKey: result.personalApiKey,
      },
      path,
    );
  }
  io.out(JSON.stringify(result, null, 2));
}

const subcommands: Record<string, (args: string[], io: CliIo) => Promise<void>> = {
  bootstrap: bootstrapCommand,
  user: userCommand,
  key: keyCommand,
  organization: organizationCommand,
};

/** Runs `spate admin <args>`; returns the exit code (0 ok, 1 failed, 2 bad usage). */
export async function runAdminCli(args: string[], io: CliIo = defaultIo): Promise<number> {
  const [name, ...rest] = args;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.out(`${ADMIN_USAGE}\n\n${adminConfigHelp()}`);
    return name === undefined ? 2 : 0;
  }
  const command = subcommands[name];
  if (!command) {
    io.err(`unknown admin command: ${name}\n${ADMIN_USAGE}`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out(ADMIN_USAGE);
    return 0;
  }
  try {
    await command(rest, io);
    return 0;
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.err(`${(err as Error).message}\n${ADMIN_USAGE}`);
      return 2;
    }
    io.err(`spate admin ${name}: ${(err as Error).message}`);
    return 1;
  }
}
