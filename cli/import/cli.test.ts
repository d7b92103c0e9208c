import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { batchUrlOf, parseImportArgs, UsageError } from './cli.js';

const dir = mkdtempSync(join(tmpdir(), 'spate-import-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('import cli', () => {
  it('import cli - flags win over SPATE_CAPTURE_URL / SPATE_PROJECT_API_KEY, which win over cluster.json', () => {
    writeFileSync(join(dir, 'cluster.json'), JSON.stringify({ captureUrl: 'http://127.0.0.1:8000', natsUrl: 'nats://x', projectId: 1, projectApiKey: 'phc_from_file' }));
    const env = { SPATE_DATA_DIR: dir };
    expect(parseImportArgs(['f.ndjson'], env, false)).toMatchObject({ batchUrl: 'http://127.0.0.1:8000/batch/', apiKey: 'phc_from_file', files: ['f.ndjson'] });
    expect(parseImportArgs(['f'], { ...env, SPATE_CAPTURE_URL: 'http://h:1', SPATE_PROJECT_API_KEY: 'phc_env' }, false)).toMatchObject({ batchUrl: 'http://h:1/batch/', apiKey: 'phc_env' });
    expect(parseImportArgs(['f', '--url', 'https://c.example.com/', '--key', 'phc_flag'], { ...env, SPATE_PROJECT_API_KEY: 'phc_env' }, false)).toMatchObject({
      batchUrl: 'https://c.example.com/batch/',
      apiKey: 'phc_flag',
    });
  });

  it('import cli - defaults: 4MiB batches, 4 in flight, stop on invalid, a bar only on a terminal', () => {
    const o = parseImportArgs(['-', '--url', 'http://h', '--key', 'phc_k'], {}, true);
    expect(o).toMatchObject({ batchBytes: 4 * 1024 * 1024, lanes: 4, invalid: 'stop', restart: false, gzip: false, progress: 'bar', requestTimeoutMs: 120_000, retryForMs: 600_000 });
    expect(o.checkpointPath).toBe(join(process.cwd(), 'spate-import.checkpoint.json'));
    expect(parseImportArgs(['-', '--url', 'http://h', '--key', 'phc_k'], {}, false).progress).toBe('lines');
  });

  it('import cli - refuses bad usage with a message naming the problem', () => {
    const base = ['--url', 'http://h', '--key', 'phc_k'];
    const cases: [string[], Record<string, string>, RegExp][] = [
      [[...base], {}, /no FILE given/],
      [['-', '-', ...base], {}, /stdin \(-\) can be given only once/],
      [['f'], { SPATE_DATA_DIR: join(dir, 'none') }, /give --url \(or SPATE_CAPTURE_URL\) and --key \(or SPATE_PROJECT_API_KEY\), or start the cluster/],
      [['f', '--url', 'http://h', '--key', 'phx_personal'], {}, /personal API key/],
      [['f', '--url', 'ftp://h', '--key', 'phc_k'], {}, /must be http/],
      [['f', '--url', 'not a url', '--key', 'phc_k'], {}, /not a URL/],
      [['f', ...base, '--batch-size', '21MiB'], {}, /between 1KiB and 20MiB/],
      [['f', ...base, '--batch-size', 'huge'], {}, /--batch-size must be a size/],
      [['f', ...base, '--concurrency', '0'], {}, /--concurrency must be an integer from 1 to 64/],
      [['f', ...base, '--invalid', 'ignore'], {}, /--invalid must be stop or skip/],
      [['f', ...base, '--timeout', 'soon'], {}, /--timeout must be a duration/],
      [['f', ...base, '--progress', 'fancy'], {}, /--progress must be bar, lines or none/],
    ];
    for (const [args, env, message] of cases) {
      expect(() => parseImportArgs(args, env, false), args.join(' ')).toThrow(message);
      try {
        parseImportArgs(args, env, false);
      } catch (err) {
        expect(err).toBeInstanceOf(UsageError);
      }
    }
  });

  it('import cli - the capture URL may be given with or without /batch/', () => {
    expect(batchUrlOf('http://h:8000')).toBe('http://h:8000/batch/');
    expect(batchUrlOf('http://h:8000/batch')).toBe('http://h:8000/batch/');
    expect(batchUrlOf('http://h:8000/batch/')).toBe('http://h:8000/batch/');
    expect(batchUrlOf('https://proxy/capture-prefix/')).toBe('https://proxy/capture-prefix/batch/');
  });
});
