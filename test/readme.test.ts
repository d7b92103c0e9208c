// README is the front door and docs/ the reference: every error code a client can see and every
// setting an operator can set must be documented there (as fastify tests that every error code
// is documented), every link between the pages must lead somewhere, and the front door stays short.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { adminConfigDefinition } from '../admin/index.js';
import { captureErrors, ingestConfigDefinition } from '../ingest/index.js';
import { describeConfig, type ConfigDefinition } from '../lib/index.js';
import { workerConfigDefinition } from '../workers/index.js';

const root = resolve(import.meta.dirname, '..');
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const readme = read('README.md');
const docs = readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`);
const pages = ['README.md', ...docs, ...readdirSync(join(root, 'bench/results')).filter((f) => f.endsWith('.md')).map((f) => `bench/results/${f}`)];

/** Sections of a Markdown page by their `## ` heading. */
function sections(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of text.split(/^## /m).slice(1)) out.set(part.slice(0, part.indexOf('\n')), part);
  return out;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function anchor(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(path: string): Set<string> {
  const text = read(path).replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchor(m[1]!.trim())));
}

describe('README and docs', () => {
  it('readme - the front door fits in 150 lines and links every page of docs/', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(150);
    for (const page of docs) expect(readme, page).toContain(`](${page})`);
  });

  it('readme - docs/capture-api.md documents every capture error code with its status', () => {
    const page = read('docs/capture-api.md');
    for (const [code, spec] of Object.entries(captureErrors)) {
      expect(page, code).toMatch(new RegExp(`\\| \`${code}\` \\| ${spec.status} \\|`));
    }
  });

  it('readme - docs/configuration.md lists exactly the settings of each deployable, with their real defaults and descriptions', () => {
    const page = sections(read('docs/configuration.md'));
    const deployables: [heading: string, definition: ConfigDefinition][] = [
      ['Ingest node (`node dist/ingest/main.js`)', ingestConfigDefinition],
      ['Admin server (`node dist/admin/main.js`)', adminConfigDefinition],
      ['Worker (`node dist/workers/main.js`)', workerConfigDefinition],
    ];
    // Defaults that depend on the machine (cores) are described in words.
    const machineDependent = new Set(['PARSE_THREADS']);
    for (const [heading, definition] of deployables) {
      const section = page.get(heading);
      expect(section, heading).toBeDefined();
      const settings = describeConfig(definition);
      for (const s of settings) {
        const row = machineDependent.has(s.env)
          ? new RegExp(`\\| \`${s.env}\` \\| [^|]+ \\| ${s.description.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\|`)
          : `| \`${s.env}\` | \`${s.default.replace(/\|/g, '\\|')}\` | ${s.description} |`;
        if (typeof row === 'string') expect(section, s.env).toContain(row);
        else expect(section, s.env).toMatch(row);
      }
      // And no row for a setting the code no longer has.
      const documented = [...section!.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1]);
      expect(documented.sort(), heading).toEqual(settings.map((s) => s.env).sort());
    }
  });

  it('readme - the screenshots the README and docs show are PNGs of at most 200 KB', () => {
    const shown = pages.flatMap((page) => [...read(page).matchAll(/!\[[^\]]*\]\(([^)\s]+\.png)\)/g)].map((m) => relative(root, resolve(dirname(join(root, page)), m[1]!))));
    expect(shown).toContain('docs/live-page.png');
    for (const png of shown) {
      const bytes = readFileSync(join(root, png));
      expect(bytes.subarray(1, 4).toString('latin1'), png).toBe('PNG');
      expect(bytes.length, png).toBeLessThanOrEqual(200 * 1024);
    }
  });

  it('readme - every relative link of the README and docs leads to a file, and to a heading there', () => {
    const broken: string[] = [];
    for (const page of pages) {
      const text = read(page).replace(/```[\s\S]*?```/g, '');
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue; // https:, mailto:
        const [file, hash] = target!.split('#') as [string, string | undefined];
        const path = file ? relative(root, resolve(dirname(join(root, page)), file)) : page;
        if (!existsSync(join(root, path))) broken.push(`${page}: ${target} (no ${path})`);
        else if (hash && path.endsWith('.md') && !anchorsOf(path).has(hash)) broken.push(`${page}: ${target} (no heading #${hash} in ${path})`);
      }
    }
    expect(broken).toEqual([]);
  });
});
