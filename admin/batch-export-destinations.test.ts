import { describe, expect, it } from 'vitest';
import { ApiError } from '../lib/index.js';
import { checkDestinationConfig, checkDestinationRules, deepMerge, publicDestinationConfig } from './batch-export-destinations.js';

function failure(fn: () => unknown): { detail: string; attr: string | null } {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return { detail: (err as ApiError).message, attr: (err as ApiError).attr };
  }
  throw new Error('expected a failure');
}

const s3 = { bucket_name: 'b', region: 'eu-west-1', prefix: 'p/' };

describe('batch export destinations', () => {
  it('destinations - unknown fields are refused by name, sorted, as PostHog words it', () => {
    expect(failure(() => checkDestinationConfig('S3', { ...s3, zeta: 1, alpha: 2 }, false))).toEqual({
      detail: "Configuration has unknown field/s: 'alpha', 'zeta'",
      attr: 'destination__config',
    });
    expect(failure(() => checkDestinationConfig('HTTP', JSON.parse('{"url":"u","token":"t","__proto__":{"x":1}}'), false)).detail).toBe(
      "Configuration has unknown field/s: '__proto__'",
    );
  });

  it('destinations - the first missing required field is named on create, none on a partial update', () => {
    expect(failure(() => checkDestinationConfig('S3', { bucket_name: 'b' }, false)).detail).toBe("Configuration missing required field: 'region'");
    expect(failure(() => checkDestinationConfig('Postgres', {}, false)).detail).toBe("Configuration missing required field: 'user'");
    expect(failure(() => checkDestinationConfig('HTTP', { url: 'x' }, false)).detail).toBe("Configuration missing required field: 'token'");
    expect(checkDestinationConfig('S3', { region: 'x' }, true)).toEqual({ region: 'x' });
    expect(checkDestinationConfig('NoOp', {}, false)).toEqual({});
  });

  it('destinations - values are checked by type; numeric and boolean strings are converted', () => {
    const pg = { user: 'u', password: 'p', host: 'h', database: 'd' };
    expect(checkDestinationConfig('Postgres', { ...pg, port: '5433', has_self_signed_cert: 'true' }, false)).toMatchObject({ port: 5433, has_self_signed_cert: true });
    expect(failure(() => checkDestinationConfig('Postgres', { ...pg, port: 'x' }, false)).detail).toBe("Configuration has invalid type: got 'str', expected 'int'");
    expect(failure(() => checkDestinationConfig('Postgres', { ...pg, port: 1.5 }, false)).detail).toBe("Configuration has invalid type: got 'float', expected 'int'");
    expect(failure(() => checkDestinationConfig('S3', { ...s3, bucket_name: 5 }, false)).detail).toBe("Configuration has invalid type: got 'int', expected 'str'");
    expect(failure(() => checkDestinationConfig('S3', { ...s3, region: null }, false)).detail).toBe("Configuration has invalid type: got 'NoneType', expected 'str'");
    expect(failure(() => checkDestinationConfig('S3', { ...s3, exclude_events: 'a' }, false)).detail).toBe("Configuration has invalid type: got 'str', expected 'list'");
    expect(checkDestinationConfig('S3', { ...s3, kms_key_id: null, include_events: ['$pageview'] }, false)).toMatchObject({ kms_key_id: null, include_events: ['$pageview'] });
  });

  it('destinations - HTTP exports only events; S3 file formats and compressions are checked', () => {
    expect(failure(() => checkDestinationRules('HTTP', {}, 'persons'))).toEqual({ detail: 'HTTP batch exports only support the events model', attr: 'model' });
    checkDestinationRules('HTTP', {}, 'events');
    checkDestinationRules('S3', { compression: 'gzip' }, 'persons');
    checkDestinationRules('S3', { file_format: 'Parquet', compression: 'zstd' }, 'events');
    expect(failure(() => checkDestinationRules('S3', { file_format: 'CSV' }, 'events')).detail).toBe(
      "File format CSV is not supported. Supported file formats are ['Parquet', 'JSONLines']",
    );
    expect(failure(() => checkDestinationRules('S3', { compression: 'zstd' }, 'events')).detail).toBe(
      "Compression zstd is not supported for file format JSONLines. Supported compressions are ['gzip', 'brotli']",
    );
  });

  it('destinations - secrets never leave through the API view', () => {
    expect(publicDestinationConfig('S3', { ...s3, aws_access_key_id: 'AK', aws_secret_access_key: 'SK' })).toEqual(s3);
    expect(publicDestinationConfig('Postgres', { user: 'u', password: 'p', host: 'h' })).toEqual({ host: 'h' });
    expect(publicDestinationConfig('HTTP', { url: 'u', token: 't' })).toEqual({ url: 'u' });
  });

  it('destinations - a patch is deep-merged: nested objects merged, anything else replaced', () => {
    expect(deepMerge({ a: 1, n: { x: 1, y: 2 }, l: [1] }, { n: { y: 3 }, l: [2], b: null })).toEqual({ a: 1, n: { x: 1, y: 3 }, l: [2], b: null });
  });
});
