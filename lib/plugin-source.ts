// Plugin source → the code the plugin runtime runs (docs/plugins.md, "Source and compilation").
// The admin server compiles `index.ts` (or `index.js`) when it is saved, so a syntax error is
// answered at once with its line, never found on a worker: TypeScript types are stripped and ES
// module syntax becomes CommonJS (sucrase, which keeps every line where it was), then QuickJS —
// the engine the workers run it in — compiles the result without running it. The compiled code
// and its SHA-256 reach the workers through the KV bucket spate-plugin-sources.
import { createHash } from 'node:crypto';
import { sharedQuickJS } from './quickjs.js';

/** The files a plugin's code is read from, in order of preference. */
export const PLUGIN_ENTRY_FILES = ['index.ts', 'index.js'] as const;

/**
 * Modules a plugin may import (anything else is refused when the source is saved): `node-fetch`
 * and `cross-fetch` give the runtime's fetch, `@posthog/plugin-scaffold` its RetryError (its
 * types are stripped).
 */
export const PLUGIN_MODULES = ['node-fetch', 'cross-fetch', '@posthog/plugin-scaffold'] as const;

/** Largest compiled plugin code: it travels as one KV value. */
export const MAX_PLUGIN_CODE_BYTES = 1024 * 1024;

/**
 * The compiled code is the body of this function (on the same first line, so line numbers stay
 * those of the source): QuickJS evaluates it to a function and calls it with the exports object.
 */
export const PLUGIN_CODE_PREFIX = '(function (exports, module, require) {';
export const PLUGIN_CODE_SUFFIX = '\n})';

export function wrapPluginCode(code: string): string {
  return `${PLUGIN_CODE_PREFIX}${code}${PLUGIN_CODE_SUFFIX}`;
}

/** A source that does not compile: what is wrong, in which file, on which line. */
export class PluginSourceError extends Error {
  override name = 'PluginSourceError';
  constructor(
    readonly file: string,
    readonly line: number | undefined,
    readonly problem: string,
  ) {
    super(`${file}${line === undefined ? '' : ` line ${line}`}: ${problem}`);
  }
}

export interface CompiledPluginSource {
  /** The file it was compiled from (index.ts or index.js). */
  file: string;
  /** CommonJS body; run it through wrapPluginCode. */
  code: string;
  /** SHA-256 of `code`, hex: its key in spate-plugin-sources. */
  hash: string;
}

const SEGMENT = /^(?!\.\.?$)[A-Za-z0-9_.-]{1,100}$/;

/** Why `name` is not a safe relative file name (undefined when it is). */
export function unsafePluginFileName(name: string): string | undefined {
  if (name.length === 0 || name.length > 200) return 'a file name has 1 to 200 characters';
  if (name.startsWith('/')) return 'file names are relative (no leading /)';
  const segments = name.split('/');
  if (segments.some((s) => s === '.' || s === '..')) return 'file names may not contain . or .. segments';
  if (!segments.every((s) => SEGMENT.test(s))) return 'file names use letters, digits, _, -, . and / between folders';
  return undefined;
}

function lineAt(text: string, index: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < index; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

/** Type stripping and ES modules → CommonJS; throws PluginSourceError. */
async function transpile(file: string, source: string): Promise<string> {
  const { transform } = await import('sucrase');
  try {
    return transform(source, {
      transforms: file.endsWith('.ts') ? ['typescript', 'imports'] : ['imports'],
      production: true,
      // QuickJS runs ES2023: optional chaining, class fields and the like stay as written.
      disableESTransforms: true,
    }).code;
  } catch (err) {
    const loc = (err as { loc?: { line?: unknown } }).loc;
    const message = err instanceof Error ? err.message.replace(/\s*\(\d+:\d+\)$/, '') : String(err);
    throw new PluginSourceError(file, typeof loc?.line === 'number' ? loc.line : undefined, message);
  }
}

function checkImports(file: string, code: string): void {
  for (const match of code.matchAll(/\brequire\((['"])(.*?)\1\)/g)) {
    const name = match[2]!;
    if (!(PLUGIN_MODULES as readonly string[]).includes(name)) {
      throw new PluginSourceError(file, lineAt(code, match.index), `import '${name}' is not available in Spate (available: ${PLUGIN_MODULES.join(', ')})`);
    }
  }
}

/** Compiles the code without running it, in the engine the workers use. */
async function checkSyntax(file: string, code: string): Promise<void> {
  const quickjs = await sharedQuickJS();
  const vm = quickjs.newContext();
  try {
    const result = vm.evalCode(wrapPluginCode(code), file, { compileOnly: true, strict: true });
    if (result.error) {
      const error = vm.dump(result.error) as { name?: unknown; message?: unknown; lineNumber?: unknown };
      result.error.dispose();
      const line = typeof error.lineNumber === 'number' ? error.lineNumber : undefined;
      const name = typeof error.name === 'string' ? error.name : 'SyntaxError';
      throw new PluginSourceError(file, line, `${name}: ${typeof error.message === 'string' ? error.message : 'does not compile'}`);
    }
    result.value.dispose();
  } finally {
    vm.dispose();
  }
}

/**
 * Compiles a plugin's entry file (index.ts, else index.js); undefined when it has neither.
 * Throws PluginSourceError for a source that does not compile.
 */
export async function compilePluginSource(files: ReadonlyMap<string, string>): Promise<CompiledPluginSource | undefined> {
  const file = PLUGIN_ENTRY_FILES.find((name) => files.has(name));
  if (file === undefined) return undefined;
  const code = await transpile(file, files.get(file)!);
  checkImports(file, code);
  const bytes = Buffer.byteLength(code);
  if (bytes > MAX_PLUGIN_CODE_BYTES) throw new PluginSourceError(file, undefined, `compiles to ${bytes} bytes; at most ${MAX_PLUGIN_CODE_BYTES} are allowed`);
  await checkSyntax(file, code);
  return { file, code, hash: createHash('sha256').update(code).digest('hex') };
}
