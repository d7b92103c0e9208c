// Invite emails sent, for their rate limits (per organization, per address). Not tied to the
// organization by a foreign key: deleting an organization (and making a new one) must not reset
// what an address has received. Rows older than the window are deleted as new ones come.
import type { MigrationBuilder } from 'node-pg-migrate';

export function up(pgm: MigrationBuilder): void {
  pgm.sql(`
    create table invite_emails (
      id bigserial primary key,
      organization_id uuid not null,
      -- lower(target_email): one address however it is typed.
      address text not null,
      sent_at timestamptz not null default clock_timestamp()
    );
    create index invite_emails_organization_idx on invite_emails (organization_id, sent_at);
    create index invite_emails_address_idx on invite_emails (address, sent_at);
    create index invite_emails_sent_at_idx on invite_emails (sent_at);
  `);
}

export function down(pgm: MigrationBuilder): void {
  pgm.sql('drop table if exists invite_emails');
}
