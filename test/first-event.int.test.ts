// The commands the README and docs/admin-api.md give a newcomer, run exactly as written, in the
// order written, in a shell whose working directory holds the cluster's `.data/` (as the checkout
// does after `npm start`): the README's first event with curl and with posthog-node, its metrics
// check, then the admin API tour and the `npx spate admin` commands. The cluster is the launcher
// behind `npm start`, run from source.
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
// `import 'posthog-node'` and `--import tsx` resolve as they do in the checkout).
const cwd = mkdtempSync(join(tmpdir(), 'spate-first-event-'));
chmodSync(cwd, 0o711); // as root, PostgreSQL (running as `postgres`) keeps its files inside
symlinkSync(join(root, 'node_modules'), join(cwd, 'node_modules'));
const dataDir = join(cwd, '.data');

/** The fenced code blocks of one `## ` section of a Markdown file, in order. */
function codeBlocks(file: string, heading: string): { lang: string; code: string }[] {
  const text = readFileSync(join(root, file), 'utf8');
  const start = text.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`${file} has no section "## ${heading}"`);
  const end = text.indexOf('\n## ', start + 1);
  const section = text.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, code: m[2]! }));
}

/** Runs a script in bash in the working directory above; stdout, and what failed if it failed. */
function bash(script: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile('bash', ['-euo', 'pipefail', '-c', script], { cwd, timeout: 120_000, env: { ...process.env, SPATE_DATA_DIR: '' } }, (err, stdout, stderr) => {
      done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

/** Every processed line stored so far. */
async function processedEvents(natsUrl: string): Promise<ProcessedEvent[]> {
  const nc = await connectNats(natsUrl, 'first-event-test');
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
      mine = (await processedEvents(cluster.natsUrl)).filter((e) => e.distinct_id === 'me');
      return mine.length >= 2;
    }, 60_000, 250);
    expect(mine.map((e) => e.event).sort()).toEqual(['hello', 'hello from node']);
    expect(mine.find((e) => e.event === 'hello from node')!.properties).toMatchObject({ plan: 'free' });
    expect(new Set(mine.map((e) => e.person_id)).size).toBe(1);
    expect(mine[0]!.person_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(mine.every((e) => e.project_id === cluster.projectId)).toBe(true);
  });

  it('first event - the admin API tour and the spate admin commands of docs/admin-api.md work as written', { timeout: 180_000 }, async () => {
    const [tour, ...tourRest] = codeBlocks('docs/admin-api.md', 'A first tour');
    const [cli, ...cliRest] = codeBlocks('docs/admin-api.md', 'Users and keys: the command line');
    expect([tour?.lang, tourRest.length, cli?.lang, cliRest.length]).toEqual(['sh', 0, 'sh', 0]);
    // `npx spate` runs the package's bin, dist/cli/spate.js, the build of cli/spate.ts: here the
    // source, so the test needs no build. Everything else runs as written.
    const npx = `npx() { if [[ $1 == spate ]]; then shift; node --import tsx ${JSON.stringify(join(root, 'cli/spate.ts'))} "$@"; else command npx "$@"; fi; }`;
    const marks = ['organizations', 'new organization', 'project', 'invite', 'domain', 'members'];
    // The tour's commands, each followed by a mark, so each answer can be told apart.
    const tourLines = tour!.code.split('\n');
    const commands = tourLines.filter((l) => /^(curl|ORG=)/.test(l));
    expect(commands.length).toBe(marks.length);
    let i = 0;
    const marked = tourLines.map((l) => (/^(curl|ORG=)/.test(l) ? `${l}\necho; echo '--- ${marks[i++]}'` : l)).join('\n');
    const r = await bash(`${npx}\n${marked}\necho "ORG=$ORG"\necho '--- cli'\n${cli!.code}`);
    expect(r.code, `${r.stderr}\n${r.stdout}`).toBe(0);
    const parts = r.stdout.split(/^--- .+\n/m);
    const answers = Object.fromEntries(marks.map((m, j) => [m, parts[j]!.trim()]));

    expect(JSON.parse(answers.organizations!)).toMatchObject({ count: 1, results: [{ id: cluster.organizationId }] });
    const org = /^ORG=(.+)$/m.exec(parts[marks.length]!)![1]!;
    expect(org).toMatch(/^[0-9a-f-]{36}$/);
    expect(JSON.parse(answers.project!)).toMatchObject({ name: 'Web', api_token: expect.stringMatching(/^phc_/) });
    expect(JSON.parse(answers.invite!)).toMatchObject({ target_email: 'ann@acme.com', level: 8 });
    expect(JSON.parse(answers.domain!)).toMatchObject({ domain: 'acme.com', verification_challenge: expect.any(String) });
    expect(JSON.parse(answers.members!)).toMatchObject({ count: 1 });

    // The command line: the user's uuid, a key (twice) and the bootstrap's JSON, as the comments say.
    const out = parts[marks.length + 1]!;
    const keys = [...out.matchAll(/^(phx_\S+)$/gm)].map((m) => m[1]!);
    expect(out).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/m);
    expect(keys.length).toBe(2);
    expect(out).toContain(`"personalApiKey": "${cluster.personalApiKey}"`);
    // Ann is an admin of Acme now, and her limited key sees Acme (and nothing else).
    const seen = await fetch(`${cluster.adminUrl}/api/organizations/`, { headers: { authorization: `Bearer ${keys[1]}` } });
    expect(seen.status).toBe(200);
    expect(((await seen.json()) as { results: { id: string }[] }).results.map((o) => o.id)).toEqual([org]);
  });
});
