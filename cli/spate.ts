#!/usr/bin/env node
// `spate` — the package's command line (ARCHITECTURE.md, "CLI"). Each command lives with the
// code it drives and is loaded only when asked for.
const USAGE = `usage:
  spate admin bootstrap [--email E]
  spate admin user --email E [--organization ORG_ID --level 1|8|15]
  spate admin key --email E --scopes SCOPE[,SCOPE…]|'*' [--organizations ORG_ID[,…]]
  spate import FILE… [--url CAPTURE_URL] [--key PROJECT_API_KEY]`;

type Command = (args: string[]) => Promise<number>;

const commands: Record<string, () => Promise<Command>> = {
  admin: async () => (await import('../admin/index.js')).runAdminCli,
  import: async () => (await import('./import/index.js')).runImportCli,
};

async function main(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  const load = name ? commands[name] : undefined;
  if (name === '--help' || name === '-h' || name === 'help') {
    console.log(USAGE);
    return 0;
  }
  if (!load) {
    console.error(name === undefined ? USAGE : `unknown command: ${name}\n${USAGE}`);
    return 2;
  }
  return (await load())(args);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exitCode = 1;
  },
);
