// Group type → index per project (at most 5, PostHog's MAX_GROUP_TYPES_PER_TEAM). A mapping never
// changes once made, so this cache needs no invalidation; new types are created here, outside
// the batch transaction, and racing workers settle on one index through the unique constraints.
import type pg from 'pg';
import { MAX_GROUP_TYPES_PER_PROJECT } from '../../lib/index.js';

export class GroupTypeRegistry {
  private readonly byProject = new Map<number, Map<string, number>>();

  indexOf(projectId: number, groupType: string): number | undefined {
    return this.byProject.get(projectId)?.get(groupType);
  }

  /** Makes sure every (project, type) has an index, creating types while the project has room. */
  async ensure(pool: pg.Pool, wanted: Iterable<readonly [number, string]>): Promise<void> {
    let missing = this.missing(wanted);
    if (missing.length === 0) return;
    await this.load(pool, [...new Set(missing.map(([p]) => p))]);
    missing = this.missing(missing);
    for (const [projectId, groupType] of missing) {
      for (let attempt = 0; attempt < MAX_GROUP_TYPES_PER_PROJECT + 1; attempt++) {
        if (this.indexOf(projectId, groupType) !== undefined) break;
        if ((this.byProject.get(projectId)?.size ?? 0) >= MAX_GROUP_TYPES_PER_PROJECT) break;
        await pool.query(
          `INSERT INTO group_type_mappings (project_id, group_type, group_type_index)
           SELECT $1, $2, i FROM generate_series(0, ${MAX_GROUP_TYPES_PER_PROJECT - 1}) AS i
           WHERE NOT EXISTS (SELECT 1 FROM group_type_mappings m WHERE m.project_id = $1 AND m.group_type_index = i)
           ORDER BY i LIMIT 1
           ON CONFLICT DO NOTHING`,
          [projectId, groupType],
        );
        await this.load(pool, [projectId]);
      }
    }
  }

  private missing(wanted: Iterable<readonly [number, string]>): (readonly [number, string])[] {
    const out: (readonly [number, string])[] = [];
    for (const pair of wanted) {
      const known = this.byProject.get(pair[0]);
      // A project with 5 types can never get another: no query needed.
      if (known?.has(pair[1]) || (known?.size ?? 0) >= MAX_GROUP_TYPES_PER_PROJECT) continue;
      out.push(pair);
    }
    return out;
  }

  private async load(pool: pg.Pool, projectIds: number[]): Promise<void> {
    const { rows } = await pool.query<{ project_id: number; group_type: string; group_type_index: number }>(
      'SELECT project_id, group_type, group_type_index FROM group_type_mappings WHERE project_id = ANY($1::int[])',
      [projectIds],
    );
    for (const row of rows) {
      let known = this.byProject.get(row.project_id);
      if (!known) this.byProject.set(row.project_id, (known = new Map<string, number>()));
      known.set(row.group_type, row.group_type_index);
    }
  }
}
