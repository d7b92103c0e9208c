import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, configMarkdown, envBool, envBytes, envDuration, envInt, loadConfig, setting } from './config.js';

const definition = {
  port: setting('PORT', envInt(8000, 1), 'listen port'),
  debug: setting('DEBUG_MODE', envBool(false), 'debug'),
  linger: setting('LINGER', envDuration('2ms'), 'linger'),
  limit: setting('LIMIT', envBytes('20MiB'), 'limit'),
  floor: setting('FLOOR', envBytes('1KiB', 1024), 'floor'),
  name: setting('NAME', z.string().min(1), 'required name'),
};

describe('config', () => {
  it('config - reads, coerces and freezes settings', () => {
    const c = loadConfig(definition, { PORT: '9000', DEBUG_MODE: 'true', LINGER: '5s', NAME: 'x' });
    expect(c).toEqual({ port: 9000, debug: true, linger: 5000, limit: 20 * 1024 * 1024, floor: 1024, name: 'x' });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('config - reports every bad variable at once, by name', () => {
    try {
      loadConfig(definition, { PORT: 'abc', DEBUG_MODE: 'maybe', LINGER: 'soon', LIMIT: 'big', FLOOR: '1023' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      for (const name of ['PORT', 'DEBUG_MODE', 'LINGER', 'LIMIT', 'FLOOR', 'NAME']) expect(problems).toContain(name);
      expect(problems).toContain('at least 1024 bytes');
    }
  });

  it('config - documents defaults as written', () => {
    const md = configMarkdown(definition);
    expect(md).toContain('| `LINGER` | `2ms` | linger |');
    expect(md).toContain('| `LIMIT` | `20MiB` |');
    expect(md).toContain('| `NAME` | `(required)` |');
  });
});
