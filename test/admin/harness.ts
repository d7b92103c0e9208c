// A real admin server for tests: a fresh PostgreSQL database, a real nats-server, port 0.
// Users, memberships and keys are made directly in the database (as the CLI does), requests
// go over HTTP with fetch.
import { Kvm, type KV } from '@nats-io/kv';
import pg from 'pg';
import { createLogger, PROJECTS_BUCKET, type NatsConnection } from '../../lib/index.js';
import { loadAdminConfig, startAdmin, type AdminConfig, type AdminHandle } from '../../admin/index.js';
import { createPersonalApiKey } from '../../admin/store/keys.js';
import { upsertMembership } from '../../admin/store/members.js';
import { createOrganization } from '../../admin/store/organizations.js';
import { ensureUser } from '../../admin/store/users.js';
import { freshDatabase, startNats, TEST_SECRET_KEY, type NatsHandle } from '../kit/index.js';

/** The limits a project's spate-projects record carries under the admin's default settings. */
export const DEFAULT_LIMITS = { historicalMessagesPerSecond: 100 } as const;

export interface ApiResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON, the raw text when not JSON, or undefined when empty. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests assert on the shape they read
  body: any;
  text: string;
}

export interface ApiRequest {
  key?: string | null;
  body?: unknown;
  /** Sent as is (no JSON encoding). */
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface AdminFixture extends AsyncDisposable {
  url: string;
  databaseUrl: string;
  config: AdminConfig;
  admin: AdminHandle;
  nats: NatsHandle;
  nc: NatsConnection;
  db: pg.Pool;
  kv(): Promise<KV>;
  api(method: string, path: string, request?: ApiRequest): Promise<ApiResponse>;
  /** A user with an organization of their own (owner) and a `*` key, unless scopes are given. */
  newUser(email: string, options?: { scopes?: string[]; organizationName?: string }): Promise<TestUser>;
  /** A further key for an existing user. */
  newKey(userId: number, scopes: string[], scopedOrganizations?: string[] | null): Promise<string>;
  addMember(organizationId: string, email: string, level: 1 | 8 | 15, scopes?: string[]): Promise<TestUser>;
  stop(): Promise<void>;
}

export interface TestUser {
  id: number;
  uuid: string;
  email: string;
  key: string;
  organizationId: string;
  projectId: number;
  projectApiKey: string;
}

/** `natsMaxPayload`: the nats-server's max_payload (the kit's default is Spate's, 8 MiB). */
export async function startAdminFixture(env: Record<string, string> = {}, options: { natsMaxPayload?: number } = {}): Promise<AdminFixture> {
  const databaseUrl = await freshDatabase();
  const nats = await startNats({ maxPayload: options.natsMaxPayload });
  const config = loadAdminConfig({
    DATABASE_URL: databaseUrl,
    ...nats.env('admin'),
    SPATE_SECRET_KEY: TEST_SECRET_KEY,
    ADMIN_PORT: '0',
    LOG_LEVEL: 'silent',
    DATABASE_POOL_SIZE: '20',
    ...env,
  });
  const admin = await startAdmin(config, { logger: createLogger('admin-test', process.env.TEST_LOG_LEVEL ?? 'silent') });
  const db = new pg.Pool({ connectionString: databaseUrl, max: 4 });
  const nc = await nats.connect('admin-test');
  let kv: KV | undefined;

  const api = async (method: string, path: string, request: ApiRequest = {}): Promise<ApiResponse> => {
    const headers: Record<string, string> = { ...request.headers };
    if (request.key) headers.authorization = `Bearer ${request.key}`;
    let body: string | undefined;
    if (request.rawBody !== undefined) body = request.rawBody;
    else if (request.body !== undefined) {
      body = JSON.stringify(request.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(path.startsWith('http') ? path : `${admin.url}${path}`, { method, headers, body });
    const text = await res.text();
    let parsed: unknown;
    if (text !== '') {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };

  const newKey = async (userId: number, scopes: string[], scopedOrganizations: string[] | null = null) =>
    (await createPersonalApiKey(db, userId, { scopes, scopedOrganizations, label: 'test' })).key;

  const newUser = async (email: string, options: { scopes?: string[]; organizationName?: string } = {}): Promise<TestUser> => {
    const { user } = await ensureUser(db, email);
    // As bootstrap makes the first one: tests of plugins install them (organizations made through
    // the API start at the default level, and tests of that make them so).
    const { id, project } = await createOrganization(db, user.id, { name: options.organizationName ?? `Org of ${email}` }, { pluginsAccessLevel: 9 });
    const key = await newKey(user.id, options.scopes ?? ['*']);
    return { id: user.id, uuid: user.uuid, email, key, organizationId: id, projectId: project.id, projectApiKey: project.api_token };
  };

  const addMember = async (organizationId: string, email: string, level: 1 | 8 | 15, scopes: string[] = ['*']): Promise<TestUser> => {
    const { user } = await ensureUser(db, email);
    await upsertMembership(db, organizationId, user.id, level);
    const { rows } = await db.query<{ id: number; api_token: string }>(
      'select id, api_token from projects where organization_id = $1 order by id limit 1',
      [organizationId],
    );
    return {
      id: user.id,
      uuid: user.uuid,
      email,
      key: await newKey(user.id, scopes),
      organizationId,
      projectId: rows[0]?.id ?? 0,
      projectApiKey: rows[0]?.api_token ?? '',
    };
  };

  const stop = async () => {
    await admin.stop();
    await nc.close();
    await db.end();
    await nats.stop();
  };

  return {
    url: admin.url,
    databaseUrl,
    config,
    admin,
    nats,
    nc,
    db,
    kv: async () => (kv ??= await new Kvm(nc).open(PROJECTS_BUCKET)),
    api,
    newUser,
    newKey,
    addMember,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
