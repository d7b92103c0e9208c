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

  it('readme - documents every setting of every deployable', () => {
    for (const definition of [ingestConfigDefinition, adminConfigDefinition, workerConfigDefinition]) {
      for (const s of describeConfig(definition)) expect(readme, s.env).toContain(`| \`${s.env}\` |`);
    }
  });
});
