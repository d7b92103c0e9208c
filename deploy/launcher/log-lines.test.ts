// npm start's children's output: readable lines for a person, JSON for a machine.
import { describe, expect, it } from 'vitest';
import { lineFormatter, logFormatOf } from './log-lines.js';

const pinoLine = JSON.stringify({ level: 30, time: Date.UTC(2026, 0, 2, 3, 4, 5), pid: 4242, hostname: 'box', name: 'ingest', msg: 'ingest node listening', url: 'http://127.0.0.1:8000' });

describe('launcher log lines', () => {
  it('log lines - pretty on a terminal, JSON elsewhere, SPATE_LOG_FORMAT decides when set', () => {
    expect(logFormatOf({}, true)).toBe('pretty');
    expect(logFormatOf({}, false)).toBe('json');
    expect(logFormatOf({ SPATE_LOG_FORMAT: 'json' }, true)).toBe('json');
    expect(logFormatOf({ SPATE_LOG_FORMAT: 'pretty' }, false)).toBe('pretty');
    expect(logFormatOf({ SPATE_LOG_FORMAT: 'auto' }, true)).toBe('pretty');
    expect(() => logFormatOf({ SPATE_LOG_FORMAT: 'yaml' }, true)).toThrow('SPATE_LOG_FORMAT must be auto, json or pretty (got "yaml")');
  });

  it('log lines - pretty: role, time, level and message on one short line, no pid or host', () => {
    const line = lineFormatter('pretty')('ingest-1', pinoLine);
    expect(line).toMatch(/^\[ingest-1\] \[\d\d:\d\d:\d\d\] INFO: ingest node listening \{"url":"http:\/\/127\.0\.0\.1:8000"\}$/);
    expect(line).not.toMatch(/4242|box|"level"/);
    const error = lineFormatter('pretty')('worker-2', JSON.stringify({ level: 50, time: 0, msg: 'batch failed', err: { type: 'Error', message: 'x', stack: 'Error: x\n    at y' } }));
    expect(error.split('\n')[0]).toMatch(/^\[worker-2\] \[\d\d:\d\d:\d\d\] ERROR: batch failed/);
    for (const l of error.split('\n')) expect(l).toMatch(/^\[worker-2\] /);
    // Other programs' lines (nats-server, PostgreSQL) stay as they are.
    expect(lineFormatter('pretty')('nats-1', '[123] 2026/01/01 Server is ready')).toBe('[nats-1] [123] 2026/01/01 Server is ready');
  });

  it('log lines - json: each line exactly as the child printed it, after its name', () => {
    expect(lineFormatter('json')('admin', pinoLine)).toBe(`[admin] ${pinoLine}`);
    expect(JSON.parse(lineFormatter('json')('admin', pinoLine).slice('[admin] '.length))).toMatchObject({ msg: 'ingest node listening' });
  });
});
