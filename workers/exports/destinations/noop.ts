// NoOp: delivers nowhere, counts what it would have delivered: a whole run (reading, filters,
// records, reports) without a destination, for testing a pipeline.
import type { ExportRecord, PersonRecord } from '../records.js';
import type { Delivered, Destination, DestinationWriter } from './destination.js';

export class NoOpDestination implements Destination {
  readonly type = 'NoOp' as const;
  async check(): Promise<void> {}
  async open(): Promise<DestinationWriter> {
    let records = 0;
    return {
      writeEvents: async (r: readonly ExportRecord[]) => void (records += r.length),
      writePersons: async (r: readonly PersonRecord[]) => void (records += r.length),
      commit: async (): Promise<Delivered> => ({ records, bytes: 0, detail: 'NoOp: nothing sent' }),
      abort: async () => undefined,
    };
  }
  async close(): Promise<void> {}
}
