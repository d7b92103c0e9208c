// Two launchers starting at once must not pick the same ports (both would find 8000 free before
// either child listened there): a port chosen is claimed until its launcher exits.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, waitFor } from '../../test/kit/index.js';
import { allocatePorts, releasePorts } from './ports.js';

const dirs: string[] = [];
const children: ChildProcess[] = [];
const dir = () => {
  const d = mkdtempSync(join(tmpdir(), 'spate-ports-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  releasePorts();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('launcher ports', () => {
  it('ports - a port another live launcher chose is not chosen again; a dead one\'s claim is taken over', async () => {
    const wanted = await freePort();
    // Another launcher: it allocates the port (free, nobody listens yet) and stays alive.
    const script = `import { allocatePorts } from ${JSON.stringify(new URL('./ports.ts', import.meta.url).pathname)};
      const p = await allocatePorts(${JSON.stringify(dir())}, { capture: ${wanted} }); console.log(JSON.stringify(p)); setInterval(() => {}, 1e9);`;
    const other = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(other);
    let out = '';
    other.stdout.on('data', (d: Buffer) => (out += d.toString()));
    await waitFor('the other launcher chose its ports', () => out.includes('}'), 30_000);
    expect(JSON.parse(out)).toEqual({ capture: wanted });

    const mine = await allocatePorts(dir(), { capture: wanted });
    expect(mine.capture).not.toBe(wanted);

    other.kill('SIGKILL'); // its claim stays behind, stale
    await new Promise((r) => other.once('exit', r));
    releasePorts();
    expect(await allocatePorts(dir(), { capture: wanted })).toEqual({ capture: wanted });
  });
});
