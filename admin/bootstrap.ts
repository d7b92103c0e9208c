// First-run set-up of a cluster: a user, an organization, a project (id 1 on a fresh database)
// and a personal API key with scope `*`. Idempotent: later runs return the same organization,
// project and key. PostgreSQL keeps only the key's hash, so the key itself is kept in a file
// of the data dir (mode 600); if that file is lost, a new key is issued.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { z } from 'zod';
import { connectNats, createLogger, type Logger, type NatsAuth } from '../lib/index.js';
import { projectLimitSettingsFromEnv } from './config.js';
import { migrate } from './db/migrate.js';
import { inTransaction } from './db/pool.js';
import type { ProjectLimitSettings } from './project-limits.js';
import { openProjectsKv } from './projects-kv.js';
import { createPersonalApiKey, keyExists } from './store/keys.js';
import { createOrganization, PLUGINS_ACCESS } from './store/organizations.js';
import { createProject, DEFAULT_PROJECT_NAME, findProject } from './store/projects.js';
import { ensureUser, type UserRow } from './store/users.js';

export const BOOTSTRAP_FILE = 'admin-bootstrap.json';
const BOOTSTRAP_LOCK_ID = 5_370_617_465_002;

export interface BootstrapOptions {
  databaseUrl: string;
  /** Where the bootstrap key is kept (e.g. $SPATE_DATA_DIR). */
  dataDir: string;
  /** When given, the project's key is put into the spate-projects KV bucket at once. */
  natsUrl?: string;
  /** Credentials for natsUrl (the admin server's NATS user, or the operator's). */
  natsAuth?: NatsAuth;
  /** Replicas of the spate-projects bucket if this call creates it (as PROJECTS_KV_REPLICAS). */
  kvReplicas?: number;
  /** The cluster's project limits, as the admin server's PROJECT_* settings say (default: from process.env). */
  projectLimits?: ProjectLimitSettings;
  email?: string;
  organizationName?: string;
  projectName?: string;
  logger?: Logger;
}

export interface BootstrapResult {
  organizationId: string;
  projectId: number;
  projectApiKey: string;
  personalApiKey: string;
  userEmail: string;
}

const keyFileSchema = z.object({ personalApiKeyId: z.string(), personalApiKey: z.string() });

function readKeyFile(path: string): z.infer<typeof keyFileSchema> | undefined {
  try {
    return keyFileSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
  } catch {
    return undefined;
  }
}

function writeKeyFile(path: string, contents: z.infer<typeof keyFileSchema>): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(contents, null, 2) + '\n', { mode: 0o600 });
  renameSync(tmp, path);
}

interface BootstrapState {
  user_id: number | null;
  organization_id: string | null;
  project_id: number | null;
  personal_api_key_id: string | null;
}

export async function bootstrapCluster(options: BootstrapOptions): Promise<BootstrapResult> {
  const log = options.logger ?? createLogger('admin-bootstrap');
  await migrate(options.databaseUrl, log);
  mkdirSync(options.dataDir, { recursive: true });
  const keyFile = join(options.dataDir, BOOTSTRAP_FILE);

  const pool = new pg.Pool({ connectionString: options.databaseUrl, max: 1, application_name: 'spate-admin-bootstrap' });
  let result: BootstrapResult;
  try {
    result = await inTransaction(pool, async (db) => {
      // One bootstrap at a time: a second launcher waits and then finds everything made.
      await db.query('select pg_advisory_xact_lock($1)', [BOOTSTRAP_LOCK_ID]);
      const { rows } = await db.query<BootstrapState>('select user_id, organization_id, project_id, personal_api_key_id from admin_bootstrap');
      const state: BootstrapState = rows[0] ?? { user_id: null, organization_id: null, project_id: null, personal_api_key_id: null };

      let user: UserRow | undefined;
      if (state.user_id !== null) {
        const found = await db.query<UserRow>('select * from users where id = $1', [state.user_id]);
        user = found.rows[0];
      }
      user ??= (await ensureUser(db, options.email ?? 'admin@spate.local')).user;

      let project = state.project_id !== null ? await findProject(db, state.project_id) : undefined;
      let organizationId = project?.organization_id ?? state.organization_id;
      if (organizationId !== null) {
        const exists = await db.query('select 1 from organizations where id = $1', [organizationId]);
        if (exists.rowCount === 0) organizationId = null;
      }
      if (organizationId === null) {
        // The operator's own organization manages the cluster's plugins, global ones included (as
        // PostHog's single-tenant default): other organizations start at 3 and use them.
        const created = await createOrganization(db, user.id, { name: options.organizationName ?? 'Spate' }, {
          projectName: options.projectName ?? DEFAULT_PROJECT_NAME,
          pluginsAccessLevel: PLUGINS_ACCESS.root,
        });
        organizationId = created.id;
        project = created.project;
      } else if (!project) {
        project = await createProject(db, organizationId, options.projectName ?? DEFAULT_PROJECT_NAME);
      }

      const saved = readKeyFile(keyFile);
      let key: { id: string; key: string };
      if (saved && saved.personalApiKeyId === state.personal_api_key_id && (await keyExists(db, saved.personalApiKeyId, saved.personalApiKey))) {
        key = { id: saved.personalApiKeyId, key: saved.personalApiKey };
      } else {
        key = await createPersonalApiKey(db, user.id, { scopes: ['*'], scopedOrganizations: null, label: 'bootstrap' });
        // Written while the lock is held, so a waiting bootstrap reads this key, not an older one.
        writeKeyFile(keyFile, { personalApiKeyId: key.id, personalApiKey: key.key });
      }

      await db.query(
        `insert into admin_bootstrap (singleton, user_id, organization_id, project_id, personal_api_key_id)
         values (true, $1, $2, $3, $4)
         on conflict (singleton) do update set user_id = excluded.user_id, organization_id = excluded.organization_id,
           project_id = excluded.project_id, personal_api_key_id = excluded.personal_api_key_id`,
        [user.id, organizationId, project.id, key.id],
      );
      return {
        organizationId,
        projectId: project.id,
        projectApiKey: project.api_token,
        personalApiKey: key.key,
        userEmail: user.email,
      };
    });

    if (options.natsUrl) {
      const nc = await connectNats(options.natsUrl, 'spate-admin-bootstrap', options.natsAuth);
      try {
        const kv = await openProjectsKv(nc, pool, log, options.projectLimits ?? projectLimitSettingsFromEnv(process.env), options.kvReplicas ?? 1);
        try {
          await kv.syncStrict([result.projectApiKey]);
        } finally {
          await kv.stop();
        }
      } finally {
        await nc.drain();
      }
    }
  } finally {
    await pool.end();
  }
  return result;
}
