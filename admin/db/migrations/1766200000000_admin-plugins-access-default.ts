// New organizations get plugins_access_level 3 (configure the plugins they can see, install
// none), PostHog's default for a multi-tenant instance: installing a plugin runs its code in the
// workers every tenant shares, so that is granted per organization (spate admin organization
// --plugins-access-level). Existing organizations keep their level; bootstrap's first
// organization is made with 9 explicitly.
import type { MigrationBuilder } from 'node-pg-migrate';

export function up(pgm: MigrationBuilder): void {
  pgm.sql('alter table organizations alter column plugins_access_level set default 3');
}

export function down(pgm: MigrationBuilder): void {
  pgm.sql('alter table organizations alter column plugins_access_level set default 9');
}
