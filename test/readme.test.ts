// README is the front door: every error code a client can see and every setting an operator
// can set must be documented there (as fastify tests that every error code is documented).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { adminConfigDefinition } from '../admin/index.js';
import { captureErrors, ingestConfigDefinition } from '../ingest/index.js';
import { describeConfig } from '../lib/index.js';
import { workerConfigDefinition } from '../workers/index.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

describe('README', () => {
  it('readme - documents every capture error code with its status', () => {
    for (const [code, spec] of Object.entries(captureErrors)) {
      expect(readme, code).toMatch(new RegExp(`\\| \`${code}\` \\| ${spec.status} \\|`));
    }
  });

  it('readme - documents every setting of every deployable with its real default and description', () => {
    // Defaults that depend on the machine (cores) are described in words in the README.
    const machineDependent = new Set(['PARSE_THREADS']);
    for (const definition of [ingestConfigDefinition, adminConfigDefinition, workerConfigDefinition]) {
      for (const s of describeConfig(definition)) {
        const row = machineDependent.has(s.env)
          ? new RegExp(`\\| \`${s.env}\` \\| [^|]+ \\| ${s.description.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\|`)
          : `| \`${s.env}\` | \`${s.default.replace(/\|/g, '\\|')}\` | ${s.description} |`;
        if (typeof row === 'string') expect(readme, s.env).toContain(row);
        else expect(readme, s.env).toMatch(row);
      }
    }
  });
});
