import { describe, expect, it } from 'vitest';
import { compilePluginSource, PluginSourceError, unsafePluginFileName } from './plugin-source.js';

const compile = (files: Record<string, string>) => compilePluginSource(new Map(Object.entries(files)));

async function failure(files: Record<string, string>): Promise<PluginSourceError> {
  const err = await compile(files).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PluginSourceError);
  return err as PluginSourceError;
}

describe('plugin source', () => {
  it('plugin source - strips types, turns exports into CommonJS and keeps every line where it was', async () => {
    const compiled = await compile({
      'index.ts': "import type { Meta } from '@posthog/plugin-scaffold'\nenum Kind { A = 'a' }\n\nexport function processEvent(event: any, meta: Meta): any {\n  return event\n}\n",
      'index.js': 'ignored: index.ts wins',
    });
    expect(compiled?.file).toBe('index.ts');
    expect(compiled?.code).not.toContain(': any');
    expect(compiled?.code).toContain('exports.processEvent = processEvent');
    expect(compiled?.code.split('\n')[3]).toContain('function processEvent(event, meta)');
    expect(compiled?.hash).toMatch(/^[0-9a-f]{64}$/);
    expect((await compile({ 'index.js': 'export const setupPlugin = () => {}' }))?.file).toBe('index.js');
    expect(await compile({ 'README.md': '# no code' })).toBeUndefined();
  });

  it('plugin source - a syntax or type-stripping error names the file and line', async () => {
    const typeError = await failure({ 'index.ts': 'export function f(a: number,, b) {}\n' });
    expect([typeError.file, typeError.line, typeError.problem]).toEqual(['index.ts', 1, 'Unexpected token']);
    // Errors only a full parser sees are QuickJS's.
    const redeclared = await failure({ 'index.js': 'let a = 1\n\nlet a = 2\n' });
    expect(redeclared.message).toBe('index.js line 3: SyntaxError: invalid redefinition of lexical identifier');
    const unclosed = await failure({ 'index.ts': 'export function processEvent(event) {\n  return event +\n}\n' });
    expect(unclosed.line).toBe(3);
    const badImport = await failure({ 'index.ts': "import fetch from 'node-fetch'\nimport { S3 } from 'aws-sdk'\nexport const setupPlugin = () => [fetch, new S3()]\n" });
    expect(badImport.message).toBe("index.ts line 2: import 'aws-sdk' is not available in Spate (available: node-fetch, cross-fetch, @posthog/plugin-scaffold)");
  });

  it('plugin source - file names are safe relative names', () => {
    for (const ok of ['index.ts', 'plugin.json', 'src/lib.ts', '.prettierrc', 'a-b_c.1.js']) expect(unsafePluginFileName(ok), ok).toBeUndefined();
    for (const bad of ['', '/etc/passwd', '../x.ts', 'a/../../x', 'a//b', 'a\\b', 'x\u0000.ts', 'a b.ts', '.', 'x'.repeat(201)]) {
      expect(unsafePluginFileName(bad), JSON.stringify(bad)).toBeDefined();
    }
  });
});
