// Writes a file of generated historical events for `spate import`:
//   npx tsx bench/generate-events.ts --count 1000000 --out events.ndjson.gz [--gzip] [--format ndjson|array]
//                                     [--distinct-ids 10000] [--with-uuid]
import { parseArgs } from 'node:util';
import { writeEventsFile } from './lib/generate-events.js';

const { values } = parseArgs({
  options: {
    count: { type: 'string', default: '1000000' },
    out: { type: 'string' },
    format: { type: 'string', default: 'ndjson' },
    gzip: { type: 'boolean', default: false },
    'distinct-ids': { type: 'string', default: '10000' },
    'with-uuid': { type: 'boolean', default: false },
  },
});
if (!values.out || (values.format !== 'ndjson' && values.format !== 'array')) {
  console.error('usage: generate-events --out FILE [--count N] [--format ndjson|array] [--gzip] [--distinct-ids N] [--with-uuid]');
  process.exit(2);
}
const started = performance.now();
await writeEventsFile(values.out, {
  count: Number(values.count),
  distinctIds: Number(values['distinct-ids']),
  format: values.format,
  gzip: values.gzip,
  withUuid: values['with-uuid'],
});
console.error(`wrote ${Number(values.count).toLocaleString('en-US')} events to ${values.out} in ${((performance.now() - started) / 1000).toFixed(1)}s`);
