// NoOp: delivers nowhere, counts what it would have delivered: a whole run (reading, filters,
// records, reports) without a destination, for testing a pipeline.
import type { ExportRecord, PersonRecord } from '../records.js';
import type { Delivered, Destination, DestinationWriter } from './destination.js';

export class NoOpDestination implements Destination {
  readonly type = 'NoOp' as const;
  check(): Promise<void> {
    return Promise.resolve();
  }
  open(): Promise<DestinationWriter> {
    let records = 0;
    return Promise.resolve({
      writeEvents: (r: readonly ExportRecord[]) => Promise.resolve(void (records += r.length)),
      writePersons: (r: readonly PersonRecord[]) => Promise.resolve(void (records += r.length)),
      commit: (): Promise<Delivered> => Promise.resolve({ records, bytes: 0, detail: 'NoOp: nothing sent' }),
      abort: () => Promise.resolve(),
    });
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}
