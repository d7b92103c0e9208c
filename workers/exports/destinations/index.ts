// The destination of a batch export, from its KV record.
import type { BatchExportRecord } from '../../../lib/index.js';
import type { EgressPolicy } from '../egress.js';
import { ExportError } from '../errors.js';
import type { Destination } from './destination.js';
import { HttpDestination, type HttpConfig } from './http.js';
import { NoOpDestination } from './noop.js';
import { PostgresDestination, type PostgresConfig } from './postgres.js';
import { S3Destination, type S3Config } from './s3.js';

export type { Delivered, Destination, DestinationWriter, RunTarget } from './destination.js';

export interface DestinationOptions {
  egress: EgressPolicy;
  /** First back-off of the HTTP destination's retries. */
  httpRetryBaseMs?: number;
}

export function createDestination(record: BatchExportRecord, config: Record<string, unknown>, options: DestinationOptions): Destination {
  switch (record.destination.type) {
    case 'S3':
      return new S3Destination(config as unknown as S3Config, options.egress);
    case 'Postgres':
      return new PostgresDestination(config as unknown as PostgresConfig, options.egress, record.model);
    case 'HTTP':
      return new HttpDestination(config as unknown as HttpConfig, options.egress, options.httpRetryBaseMs);
    case 'NoOp':
      return new NoOpDestination();
    default:
      throw new ExportError('invalid_config', `destination type ${record.destination.type} is not supported: S3, Postgres, HTTP or NoOp`);
  }
}
