// Batch exports (with runs, backfills and run logs), plugins (with source files), plugin configs
// (with logs and job requests), the activity log and the NATS outbox.
import type { MigrationBuilder } from 'node-pg-migrate';

const RUN_STATUSES = `('Starting', 'Running', 'Completed', 'Failed', 'FailedRetryable', 'Cancelled', 'TimedOut', 'Terminated')`;

export function up(pgm: MigrationBuilder): void {
  pgm.sql(`
    create table batch_exports (
      id uuid primary key default gen_random_uuid(),
      team_id integer not null references projects (id) on delete cascade,
      name text not null,
      model text not null default 'events' check (model in ('events', 'persons')),
      destination_type text not null,
      -- Secrets included: never returned by the API, needed by the runner (KV spate-batch-exports).
      destination_config jsonb not null default '{}',
      interval text not null check (interval in ('hour', 'day', 'week', 'every 5 minutes', 'every 15 minutes')),
      paused boolean not null default false,
      last_paused_at timestamptz,
      start_at timestamptz,
      end_at timestamptz,
      hogql_query text,
      deleted boolean not null default false,
      created_by_id integer references users (id) on delete set null,
      created_at timestamptz not null default now(),
      last_updated_at timestamptz not null default now(),
      constraint batch_exports_start_before_end check (start_at is null or end_at is null or start_at < end_at)
    );
    create index batch_exports_team_idx on batch_exports (team_id, created_at desc, id desc) where not deleted;

    create table batch_export_backfills (
      id uuid primary key default gen_random_uuid(),
      batch_export_id uuid not null references batch_exports (id) on delete cascade,
      start_at timestamptz not null,
      end_at timestamptz not null,
      status text not null default 'Starting' check (status in ${RUN_STATUSES}),
      total_runs integer not null,
      created_by_id integer references users (id) on delete set null,
      created_at timestamptz not null default now(),
      finished_at timestamptz,
      last_updated_at timestamptz not null default now()
    );
    create index batch_export_backfills_export_idx on batch_export_backfills (batch_export_id, created_at desc);

    create table batch_export_runs (
      id uuid primary key default gen_random_uuid(),
      batch_export_id uuid not null references batch_exports (id) on delete cascade,
      backfill_id uuid references batch_export_backfills (id) on delete cascade,
      status text not null check (status in ${RUN_STATUSES}),
      records_completed integer,
      records_total_count integer,
      latest_error text,
      data_interval_start timestamptz,
      data_interval_end timestamptz not null,
      cursor text,
      created_at timestamptz not null default now(),
      finished_at timestamptz,
      last_updated_at timestamptz not null default now()
    );
    -- One run per data interval of the schedule (backfill_id null) or of a backfill: what the
    -- runner's status updates are matched on.
    create unique index batch_export_runs_interval_key
      on batch_export_runs (batch_export_id, backfill_id, data_interval_start, data_interval_end) nulls not distinct;
    create index batch_export_runs_latest_idx
      on batch_export_runs (batch_export_id, created_at desc, data_interval_start desc nulls last, id desc);
    create index batch_export_runs_backfill_idx on batch_export_runs (backfill_id) where backfill_id is not null;

    -- Append-only and high volume: no foreign keys (inserts stay cheap, deleting an export never
    -- waits on its logs); LOG_RETENTION removes old entries.
    create table batch_export_log_entries (
      id uuid primary key,
      team_id integer not null,
      batch_export_id uuid not null,
      run_id uuid,
      timestamp timestamptz not null,
      level text not null,
      message text not null,
      instance_id text
    );
    create index batch_export_log_entries_export_idx on batch_export_log_entries (batch_export_id, timestamp desc);
    create index batch_export_log_entries_timestamp_idx on batch_export_log_entries (timestamp);

    create table plugins (
      id serial primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      -- The collection it was created in (pipeline_destinations, …); its capabilities agree.
      kind text not null check (kind in ('destination', 'frontend_app', 'import_app', 'transformation')),
      plugin_type text not null check (plugin_type in ('local', 'custom', 'repository', 'source', 'inline')),
      name text not null,
      description text not null default '',
      url text,
      icon text,
      config_schema jsonb not null default '[]',
      tag text,
      latest_tag text,
      latest_tag_checked_at timestamptz,
      is_global boolean not null default false,
      capabilities jsonb not null default '{}',
      metrics jsonb not null default '{}',
      public_jobs jsonb not null default '{}',
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    );
    create index plugins_organization_idx on plugins (organization_id, kind, id);
    create index plugins_global_idx on plugins (kind, id) where is_global;

    create table plugin_source_files (
      plugin_id integer not null references plugins (id) on delete cascade,
      filename text not null,
      source text not null,
      updated_at timestamptz not null default now(),
      primary key (plugin_id, filename)
    );

    create table plugin_configs (
      id serial primary key,
      team_id integer not null references projects (id) on delete cascade,
      plugin_id integer not null references plugins (id) on delete cascade,
      enabled boolean not null default false,
      "order" integer not null,
      -- Secrets included: masked in API answers, needed by workers (KV spate-plugin-configs).
      config jsonb not null default '{}',
      name text,
      description text,
      deleted boolean not null default false,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      constraint plugin_configs_deleted_disabled check (not (deleted and enabled))
    );
    create index plugin_configs_team_idx on plugin_configs (team_id, "order", plugin_id, id);
    create index plugin_configs_plugin_idx on plugin_configs (plugin_id);

    create table plugin_log_entries (
      id uuid primary key,
      team_id integer not null,
      plugin_id integer not null,
      plugin_config_id integer not null,
      timestamp timestamptz not null,
      source text not null,
      type text not null,
      message text not null,
      instance_id uuid
    );
    create index plugin_log_entries_config_idx on plugin_log_entries (plugin_config_id, timestamp desc, id desc);
    create index plugin_log_entries_timestamp_idx on plugin_log_entries (timestamp);

    create table plugin_jobs (
      id uuid primary key default gen_random_uuid(),
      team_id integer not null references projects (id) on delete cascade,
      plugin_config_id integer not null references plugin_configs (id) on delete cascade,
      type text not null,
      payload jsonb not null default '{}',
      operation text not null check (operation in ('start', 'stop')),
      created_by_id integer references users (id) on delete set null,
      created_at timestamptz not null default now()
    );
    create index plugin_jobs_config_idx on plugin_jobs (plugin_config_id, created_at desc);

    -- Who changed what, when (plugins, plugin configs, batch exports).
    create table activity_log (
      id uuid primary key default gen_random_uuid(),
      organization_id uuid not null references organizations (id) on delete cascade,
      team_id integer,
      user_id integer references users (id) on delete set null,
      scope text not null,
      item_id text not null,
      activity text not null,
      detail jsonb not null default '{}',
      created_at timestamptz not null default clock_timestamp()
    );
    create index activity_log_item_idx on activity_log (scope, item_id, created_at desc);
    create index activity_log_organization_idx on activity_log (organization_id, created_at desc);

    -- Messages to publish on JetStream, written in the transaction of the change they announce
    -- and deleted once the stream acknowledged them (the transactional outbox pattern).
    create table nats_outbox (
      id bigserial primary key,
      subject text not null,
      msg_id text not null,
      payload text not null,
      created_at timestamptz not null default now()
    );

    -- Announce changes (at commit) so every admin replica updates the KV buckets, whoever made
    -- the change (a request, a cascade from a deleted project or organization, SQL by hand).
    create function notify_batch_export_change() returns trigger language plpgsql as $$
    begin
      perform pg_notify('spate_batch_exports', coalesce(new.id, old.id)::text);
      return null;
    end
    $$;
    create trigger batch_exports_notify after insert or update or delete on batch_exports
      for each row execute function notify_batch_export_change();

    create function notify_plugin_config_change() returns trigger language plpgsql as $$
    begin
      if tg_op in ('UPDATE', 'DELETE') then
        perform pg_notify('spate_plugin_configs', old.team_id::text);
      end if;
      if tg_op in ('INSERT', 'UPDATE') then
        perform pg_notify('spate_plugin_configs', new.team_id::text);
      end if;
      return null;
    end
    $$;
    create trigger plugin_configs_notify after insert or update or delete on plugin_configs
      for each row execute function notify_plugin_config_change();

    -- A plugin's name, type or capabilities are part of every enabled config's KV record.
    create function notify_plugin_change() returns trigger language plpgsql as $$
    begin
      perform pg_notify('spate_plugin_configs', t.team_id::text)
        from (select distinct team_id from plugin_configs where plugin_id = new.id and enabled) t;
      return null;
    end
    $$;
    create trigger plugins_notify after update on plugins
      for each row execute function notify_plugin_change();
  `);
}

export function down(pgm: MigrationBuilder): void {
  pgm.sql(`
    drop table if exists nats_outbox, activity_log, plugin_jobs, plugin_log_entries, plugin_configs,
      plugin_source_files, plugins, batch_export_log_entries, batch_export_runs, batch_export_backfills,
      batch_exports cascade;
    drop function if exists notify_batch_export_change(), notify_plugin_config_change(), notify_plugin_change();
  `);
}
