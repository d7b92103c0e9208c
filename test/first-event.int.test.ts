// The commands the README and docs/admin-api.md give a newcomer, run exactly as written, in the
// order written, in a shell whose working directory holds the cluster's `.data/` (as the checkout
// does after `npm start`): the README's first event with curl and with posthog-node and its metrics
// check; every command of docs/admin-api.md (the tour, `npx spate admin`, batch exports, plugins);
// the import of docs/import.md. The cluster is the launcher behind `npm start`, run from source.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectNats, parseNdjson, readClusterFile, STREAMS, type ClusterFile, type ProcessedEvent } from '../lib/index.js';
import { waitFor } from './kit/index.js';

const root = resolve(import.meta.dirname, '..');
// The shell's working directory: `.data/` is the cluster's, `node_modules` the checkout's (so
// `import 'posthog-node'`, `npx tsx` and `--import tsx` resolve as they do in the checkout).
const cwd = mkdtempSync(join(tmpdir(), 'spate-first-event-'));
chmodSync(cwd, 0o711); // as root, PostgreSQL (running as `postgres`) keeps its files inside
symlinkSync(join(root, 'node_modules'), join(cwd, 'node_modules'));
symlinkSync(join(root, 'bench'), join(cwd, 'bench')); // docs/import.md makes a file with bench/generate-events.ts
const dataDir = join(cwd, '.data');

/** The fenced code blocks of a Markdown file, or of one of its `## ` sections, in order. */
function codeBlocks(file: string, heading?: string): { lang: string; code: string }[] {
  const text = readFileSync(join(root, file), 'utf8');
  const start = heading === undefined ? 0 : text.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`${file} has no section "## ${heading}"`);
  const end = heading === undefined ? -1 : text.indexOf('\n## ', start + 1);
  const section = text.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, code: m[2]! }));
}

/** The commands of a shell block: lines joined where they end in a backslash; comment lines dropped. */
function shellCommands(code: string): string[] {
  const commands: string[] = [];
  let current = '';
  for (const line of code.split('\n')) {
    if (!current && /^\s*(#.*)?$/.test(line)) continue;
    current += (current ? '\n' : '') + line;
    if (!line.endsWith('\\')) {
      commands.push(current);
      current = '';
    }
  }
  return commands;
}

/** Runs a script in bash in the working directory above; stdout, and what failed if it failed. */
function bash(script: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile('bash', ['-euo', 'pipefail', '-c', script], { cwd, timeout: 120_000, env: { ...process.env, SPATE_DATA_DIR: '' } }, (err, stdout, stderr) => {
      done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

// `npx spate` runs the package's bin, dist/cli/spate.js, the build of cli/spate.ts: here the
// source, so the tests need no build. Everything else runs as written.
const NPX = `npx() { if [[ $1 == spate ]]; then shift; node --import tsx ${JSON.stringify(join(root, 'cli/spate.ts'))} "$@"; else command npx "$@"; fi; }`;

/** Runs commands in one bash session, in order; each one's first line and output. */
async function runCommands(commands: string[]): Promise<{ command: string; output: string }[]> {
  // After each command a mark, so each one's output can be told apart.
  const script = commands.map((c, i) => `${c}\necho; echo '--- ${i}'`).join('\n');
  const r = await bash(`${NPX}\n${script}`);
  expect(r.code, `${r.stderr}\n${r.stdout}`).toBe(0);
  const outputs = r.stdout.split(/^--- \d+\n/m).slice(0, commands.length).map((o) => o.trim());
  return commands.map((command, i) => ({ command: command.split('\n')[0]!, output: outputs[i]! }));
}

/** Events stored in a stream (the Spate-Events header of each message), read as cluster.json's operator. */
async function streamEvents(c: ClusterFile, stream: string): Promise<number> {
  const nc = await connectNats(c.natsUrl, 'first-event-test', { user: c.natsUser, pass: c.natsPassword });
  try {
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(stream);
    let events = 0;
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      const m = await jsm.streams.getMessage(stream, { seq });
      events += Number(m?.header.get('Spate-Events') ?? 0);
    }
    return events;
  } finally {
    await nc.close();
  }
}

/** Every processed line stored so far. */
async function processedEvents(c: ClusterFile): Promise<ProcessedEvent[]> {
  const nc = await connectNats(c.natsUrl, 'first-event-test', { user: c.natsUser, pass: c.natsPassword });
  try {
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(STREAMS.processed);
    const events: ProcessedEvent[] = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      const m = await jsm.streams.getMessage(STREAMS.processed, { seq });
      if (m) events.push(...parseNdjson<ProcessedEvent>(m.data));
    }
    return events;
  } finally {
    await nc.close();
  }
}

describe('a newcomer with the README and docs', () => {
  let launcher: ChildProcess;
  let cluster: ClusterFile;

  beforeAll(async () => {
    launcher = spawn(process.execPath, ['--import', 'tsx', join(root, 'deploy/start.ts')], {
      cwd: root,
      env: { ...process.env, SPATE_DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group, as in a terminal
    });
    let output = '';
    launcher.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    launcher.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    await waitFor('npm start ready', () => {
      if (output.includes('[spate] failed to start') || launcher.exitCode !== null) throw new Error(`the launcher exited:\n${output}`);
      return output.includes('[spate] ready.');
    }, 120_000, 200);
    cluster = readClusterFile(join(dataDir, 'cluster.json'));
  }, 150_000);

  afterAll(async () => {
    if (launcher?.pid && launcher.exitCode === null) {
      const exited = new Promise((r) => launcher.once('exit', r));
      process.kill(-launcher.pid, 'SIGTERM');
      await exited;
    }
    rmSync(cwd, { recursive: true, force: true });
  }, 60_000);

  it('first event - the README\'s curl and posthog-node commands store events that workers process', { timeout: 120_000 }, async () => {
    const [curl, sdk, metrics, ...rest] = codeBlocks('README.md', 'Send a first event');
    expect([curl?.lang, sdk?.lang, metrics?.lang, rest.length]).toEqual(['sh', 'js', 'sh', 0]);
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    expect(readme).toContain('in a file `hello.mjs`');
    expect(readme).toContain('Run it with `node hello.mjs`');
    writeFileSync(join(cwd, 'hello.mjs'), sdk!.code);

    // One terminal, in the order the README gives.
    // (curl's answer ends with no newline: the echo gives it one, as a terminal's prompt would.)
    const r = await bash(`${curl!.code}\necho; echo '--- hello.mjs'\nnode hello.mjs\necho '--- metrics'\n${metrics!.code}`);
    expect(r.code, r.stderr).toBe(0);
    const [curlOut, sdkOut, metricsOut] = r.stdout.split(/^--- \S+\n/m);
    expect(curlOut!.trim()).toBe('{"status":1}'); // what the README says the answer is
    expect(sdkOut!.trim()).toBe('');
    // Both events stored: the curl one and posthog-node's.
    const accepted = /^spate_ingest_events_accepted_total\{[^}]*stream="events"[^}]*\} (\d+)$/m.exec(metricsOut!);
    expect(accepted, metricsOut).not.toBeNull();
    expect(Number(accepted![1])).toBeGreaterThanOrEqual(2);

    // And processed, each with the person of distinct id "me" (the README says a worker gives it one).
    let mine: ProcessedEvent[] = [];
    await waitFor('both events processed', async () => {
      mine = (await processedEvents(cluster)).filter((e) => e.distinct_id === 'me');
      return mine.length >= 2;
    }, 60_000, 250);
    expect(mine.map((e) => e.event).sort()).toEqual(['hello', 'hello from node']);
    expect(mine.find((e) => e.event === 'hello from node')!.properties).toMatchObject({ plan: 'free' });
    expect(new Set(mine.map((e) => e.person_id)).size).toBe(1);
    expect(mine[0]!.person_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(mine.every((e) => e.project_id === cluster.projectId)).toBe(true);
  });

  it('first event - every command of docs/admin-api.md works as written, in order', { timeout: 180_000 }, async () => {
    // Shell blocks are run; a json block shows an answer and must at least be JSON.
    const all = codeBlocks('docs/admin-api.md');
    expect(all.map((b) => b.lang).filter((lang) => lang !== 'json')).toEqual(['sh', 'sh', 'sh', 'sh']);
    for (const shown of all.filter((b) => b.lang === 'json')) expect(() => JSON.parse(shown.code), shown.code).not.toThrow();
    const blocks = all.filter((b) => b.lang === 'sh');
    const ran = await runCommands(blocks.flatMap((b) => shellCommands(b.code)));
    const answer = (start: string) => {
      const found = ran.find((c) => c.command.startsWith(start));
      expect(found, start).toBeDefined();
      return found!.output;
    };

    // Every API answer is JSON, none of them an error; the spate admin commands print lines.
    for (const { command, output } of ran) {
      if (command.startsWith('npx ') || output === '') continue;
      expect(() => JSON.parse(output), `${command}\n${output}`).not.toThrow();
      expect(Object.keys(JSON.parse(output) as object), `${command}\n${output}`).not.toEqual(expect.arrayContaining(['type', 'code', 'detail']));
    }
    expect(JSON.parse(answer('curl -s -H "$AUTH" "$ADMIN/api/organizations/"'))).toMatchObject({ count: 1, results: [{ id: cluster.organizationId }] });
    expect(JSON.parse(answer('curl -s -H "$AUTH" "$ADMIN/api/projects/$PROJECT/"'))).toMatchObject({ name: 'Web', api_token: expect.stringMatching(/^phc_/) });
    expect(JSON.parse(answer('curl -s -H "$AUTH" -H "$JSON" -d \'{"target_email"'))).toMatchObject({ target_email: 'ann@acme.com', level: 8 });
    expect(JSON.parse(answer('curl -s -H "$AUTH" -H "$JSON" -d \'{"domain"'))).toMatchObject({ domain: 'acme.com', verification_challenge: expect.any(String) });
    expect(JSON.parse(answer('curl -s -H "$AUTH" "$ADMIN/api/organizations/$ORG/members/'))).toMatchObject({ count: 1 });

    // The command line: the user's uuid, two keys and the bootstrap's JSON, as the comments say.
    expect(answer('npx spate admin user').split('\n').at(-1)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    const keys = ran.filter((c) => c.command.startsWith('npx spate admin key')).map((c) => c.output.split('\n').at(-1)!);
    expect(keys).toEqual([expect.stringMatching(/^phx_/), expect.stringMatching(/^phx_/)]);
    expect(JSON.parse(answer('npx spate admin bootstrap'))).toMatchObject({ personalApiKey: cluster.personalApiKey });
    // Ann's key limited to Acme sees Acme only.
    const seen = await fetch(`${cluster.adminUrl}/api/organizations/`, { headers: { authorization: `Bearer ${keys[1]}` } });
    expect(((await seen.json()) as { results: { name: string }[] }).results.map((o) => o.name)).toEqual(['Acme']);

    // The export: paused, with the backfill's runs; the plugin config: enabled, its logs empty.
    expect(JSON.parse(answer('curl -s -H "$AUTH" "$ADMIN/api/organizations/$ORG/batch_exports/$EXPORT/"'))).toMatchObject({
      name: 'To S3',
      paused: true,
      latest_runs: expect.arrayContaining([expect.objectContaining({ status: 'Starting' })]),
    });
    expect(JSON.parse(answer('curl -s -H "$AUTH" "$ADMIN/api/projects/$PROJECT/plugin_configs/$CONFIG/logs/'))).toMatchObject({ count: 0 });
  });

  it('first event - the spate import commands of docs/import.md import a file once', { timeout: 180_000 }, async () => {
    const blocks = codeBlocks('docs/import.md');
    expect(blocks.map((b) => b.lang)).toEqual(['sh']);
    const ran = await runCommands(shellCommands(blocks[0]!.code));
    expect(ran.map((c) => c.command.split(' ').slice(0, 3).join(' '))).toEqual(['npx tsx bench/generate-events.ts', 'npx spate import', 'npx spate import']);
    const [, first, again] = ran;
    expect(first!.output).toContain('events.ndjson.gz: imported — 10,000 events sent and acknowledged this run');
    expect(again!.output).toContain('events.ndjson.gz: already imported, nothing sent — 0 events sent');
    // In HISTORICAL once: the second run sent nothing.
    expect(await streamEvents(cluster, STREAMS.historical)).toBe(10_000);
  });
});
