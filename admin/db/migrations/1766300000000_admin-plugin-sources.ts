// Compiled plugin code (lib/plugin-source.ts): update_source compiles index.ts / index.js and
// stores the result with its SHA-256, which the KV bucket spate-plugin-sources is keyed by. The
// trigger announces the hashes a plugin stops and starts using, so the bucket gains and loses
// them; the plugins_notify trigger already announces the change to every enabled config's record.
import type { MigrationBuilder } from 'node-pg-migrate';

export function up(pgm: MigrationBuilder): void {
  pgm.sql(`
    alter table plugins
      add column source_file text,
      add column source_hash text,
      add column compiled_source text,
      add constraint plugins_compiled_source_complete check ((source_hash is null) = (compiled_source is null));
    create index plugins_source_hash_idx on plugins (source_hash) where source_hash is not null;

    create function notify_plugin_source_change() returns trigger language plpgsql as $$
    begin
      if tg_op in ('UPDATE', 'DELETE') and old.source_hash is not null then
        perform pg_notify('spate_plugin_sources', old.source_hash);
      end if;
      if tg_op in ('INSERT', 'UPDATE') and new.source_hash is not null then
        perform pg_notify('spate_plugin_sources', new.source_hash);
      end if;
      return null;
    end
    $$;
    create trigger plugins_source_notify after insert or delete or update of source_hash on plugins
      for each row execute function notify_plugin_source_change();
  `);
}

export function down(pgm: MigrationBuilder): void {
  pgm.sql(`
    drop trigger plugins_source_notify on plugins;
    drop function notify_plugin_source_change();
    alter table plugins drop column source_file, drop column source_hash, drop column compiled_source;
  `);
}
