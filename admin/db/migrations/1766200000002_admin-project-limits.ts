// Per-project capture limits (null: the cluster's default, PROJECT_* settings of the admin
// server). They travel to ingest nodes in the spate-projects records, so a change of them
// announces the project's key like a change of the key itself.
import type { MigrationBuilder } from 'node-pg-migrate';

export function up(pgm: MigrationBuilder): void {
  pgm.sql(`
    alter table projects
      add column capture_events_per_second integer check (capture_events_per_second >= 1),
      add column capture_events_per_day integer check (capture_events_per_day >= 1),
      add column historical_messages_per_second integer check (historical_messages_per_second >= 1);
    drop trigger projects_notify on projects;
    create trigger projects_notify after insert or delete or update of api_token, organization_id,
        capture_events_per_second, capture_events_per_day, historical_messages_per_second on projects
      for each row execute function notify_project_change();
  `);
}

export function down(pgm: MigrationBuilder): void {
  pgm.sql(`
    drop trigger projects_notify on projects;
    create trigger projects_notify after insert or delete or update of api_token, organization_id on projects
      for each row execute function notify_project_change();
    alter table projects drop column capture_events_per_second, drop column capture_events_per_day,
      drop column historical_messages_per_second;
  `);
}
