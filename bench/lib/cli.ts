// Command lines of the bench programs: `--help` prints the usage and exits 0; an unknown or bad
// option prints what is wrong and the usage and exits 2, never a stack trace (and a typo never
// starts a minutes-long run with defaults).
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** Prints the problem and the usage on stderr and exits 2. */
export function usageError(usage: string, problem: string): never {
  console.error(`${problem}\n\n${usage}`);
  process.exit(2);
}

/** parseArgs (strict: unknown options are refused) with `--help`/`-h` and readable errors. */
export function parseBenchArgs<const T extends ParseArgsConfig>(usage: string, config: T): ReturnType<typeof parseArgs<T>> {
  const args = config.args ?? process.argv.slice(2);
  // Before parsing, so `--help` works beside options that would be refused.
  if (args.includes('--help') || args.includes('-h')) {
    console.log(usage);
    process.exit(0);
  }
  try {
    return parseArgs<T>({ ...config, args });
  } catch (err) {
    return usageError(usage, err instanceof Error ? err.message : String(err));
  }
}
