// Threads and child processes need a file Node can run. Built code (dist/*.js) runs as is;
// source code (*.ts, under vitest or tsx) runs through tsx's loader.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface RuntimeModule {
  /** Absolute path of the file to run. */
  path: string;
  /** Node options needed to run it (the tsx loader for TypeScript sources). */
  execArgv: string[];
}

/** Resolves `relative` (written without extension) next to the module at `fromUrl`. */
export function runtimeModule(fromUrl: string, relative: string): RuntimeModule {
  const fromTs = fromUrl.endsWith('.ts');
  const path = fileURLToPath(new URL(`${relative}${fromTs ? '.ts' : '.js'}`, fromUrl));
  if (!existsSync(path)) throw new Error(`runtime module not found: ${path}`);
  return { path, execArgv: fromTs ? ['--import', 'tsx'] : [] };
}
