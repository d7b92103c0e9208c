// Admin schema, first version. Table names avoid the workers' tables (persons,
// person_distinct_ids, groups, group_type_mappings, ingestion_warnings, event_dedup,
// shard_positions), which live in the same database with their own migrations table.
import type { MigrationBuilder } from 'node-pg-migrate';

export function up(pgm: MigrationBuilder): void {
  pgm.sql(`
    create table users (
      id serial primary key,
      uuid uuid not null unique default gen_random_uuid(),
      distinct_id text not null unique,
      email text not null,
      first_name text not null default '',
      last_name text not null default '',
      is_email_verified boolean not null default false,
      hedgehog_config jsonb,
      created_at timestamptz not null default now()
    );
    -- Emails compare case-insensitively: one user per address however it is typed.
    create unique index users_email_lower_key on users (lower(email));

    create table organizations (
      id uuid primary key default gen_random_uuid(),
      name text not null,
      slug text not null unique,
      logo_media_id uuid,
      is_member_join_email_enabled boolean not null default true,
      enforce_2fa boolean,
      -- 9 = root: a self-hosted organization manages its own plugins (PostHog non-cloud default).
      plugins_access_level smallint not null default 9,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    );
    create index organizations_created_at_idx on organizations (created_at, id);

    create table organization_memberships (
      id uuid primary key default gen_random_uuid(),
      organization_id uuid not null references organizations (id) on delete cascade,
      user_id integer not null references users (id) on delete cascade,
      level smallint not null check (level in (1, 8, 15)),
      joined_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (organization_id, user_id)
    );
    create index organization_memberships_user_idx on organization_memberships (user_id);

    -- Projects are PostHog's "teams": events name them by the integer id.
    create table projects (
      id serial primary key,
      uuid uuid not null unique default gen_random_uuid(),
      organization_id uuid not null references organizations (id) on delete cascade,
      name text not null,
      api_token text not null unique,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    );
    create index projects_organization_idx on projects (organization_id, id);

    create table personal_api_keys (
      id uuid primary key default gen_random_uuid(),
      user_id integer not null references users (id) on delete cascade,
      label text not null default '',
      secure_value text not null unique,
      mask_value text not null,
      scopes text[] not null,
      -- null: every organization of the user.
      scoped_organizations uuid[],
      created_at timestamptz not null default now(),
      last_used_at timestamptz
    );
    create index personal_api_keys_user_idx on personal_api_keys (user_id);

    create table organization_invites (
      id uuid primary key default gen_random_uuid(),
      organization_id uuid not null references organizations (id) on delete cascade,
      target_email text not null,
      first_name text not null default '',
      level smallint not null default 1 check (level in (1, 8, 15)),
      message text,
      private_project_access jsonb not null default '[]',
      emailing_attempt_made boolean not null default false,
      created_by_id integer references users (id) on delete set null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    );
    create index organization_invites_org_idx on organization_invites (organization_id, created_at desc, id desc);
    create index organization_invites_email_idx on organization_invites (organization_id, lower(target_email));

    create table organization_domains (
      id uuid primary key default gen_random_uuid(),
      organization_id uuid not null references organizations (id) on delete cascade,
      domain text not null,
      verification_challenge text not null,
      verified_at timestamptz,
      last_verification_retry timestamptz,
      jit_provisioning_enabled boolean not null default false,
      sso_enforcement text not null default '',
      saml_entity_id text not null default '',
      saml_acs_url text not null default '',
      saml_x509_cert text not null default '',
      created_at timestamptz not null default now(),
      constraint organization_domains_domain_key unique (domain)
    );
    create index organization_domains_org_idx on organization_domains (organization_id, domain);

    -- What the first run created, so later runs return the same organization and project.
    create table admin_bootstrap (
      singleton boolean primary key default true check (singleton),
      user_id integer references users (id) on delete set null,
      organization_id uuid references organizations (id) on delete set null,
      project_id integer references projects (id) on delete set null,
      personal_api_key_id uuid references personal_api_keys (id) on delete set null
    );

    -- Every change of a project's token or organization is announced (at commit) on
    -- channel spate_projects with the affected token, whoever made it (API, CLI, bootstrap,
    -- another replica): admin servers listen and update the spate-projects KV bucket.
    create function notify_project_change() returns trigger language plpgsql as $$
    begin
      if tg_op in ('UPDATE', 'DELETE') then
        perform pg_notify('spate_projects', old.api_token);
      end if;
      if tg_op in ('INSERT', 'UPDATE') and (tg_op = 'INSERT' or new.api_token <> old.api_token) then
        perform pg_notify('spate_projects', new.api_token);
      end if;
      return null;
    end
    $$;
    create trigger projects_notify after insert or delete or update of api_token, organization_id on projects
      for each row execute function notify_project_change();
  `);
}

export function down(pgm: MigrationBuilder): void {
  pgm.sql(`
    drop table if exists admin_bootstrap, organization_domains, organization_invites, personal_api_keys,
      projects, organization_memberships, organizations, users cascade;
    drop function if exists notify_project_change();
  `);
}
