// Writes a file of generated historical events for `spate import`:
//   npx tsx bench/generate-events.ts --count 1000000 --out events.ndjson.gz [--gzip] [--format ndjson|array]
//                                     [--distinct-ids 10000] [--with-uuid]
import { parseBenchArgs, usageError } from './lib/cli.js';
import { writeEventsFile } from './lib/generate-events.js';

const USAGE = `usage: npx tsx bench/generate-events.ts --out FILE [--count N] [--format ndjson|array] [--gzip] [--distinct-ids N] [--with-uuid]

Writes generated events (the shape SDKs send, ~330 bytes each) for \`spate import\` and the benchmark.

  --out FILE          where to write (required)
  --count N           events (default 1000000)
  --format F          ndjson (one event a line, default) or array (one JSON array)
  --gzip              gzip the file
  --distinct-ids N    distinct ids the events are spread over (default 10000)
  --with-uuid         give every event a uuid (otherwise the importer derives one)
  -h, --help          this text`;

const { values } = parseBenchArgs(USAGE, {
  options: {
    count: { type: 'string', default: '1000000' },
    out: { type: 'string' },
    format: { type: 'string', default: 'ndjson' },
    gzip: { type: 'boolean', default: false },
    'distinct-ids': { type: 'string', default: '10000' },
    'with-uuid': { type: 'boolean', default: false },
  },
});
if (!values.out) usageError(USAGE, '--out is required');
if (values.format !== 'ndjson' && values.format !== 'array') usageError(USAGE, `--format must be ndjson or array (got ${JSON.stringify(values.format)})`);
const started = performance.now();
await writeEventsFile(values.out, {
  count: Number(values.count),
  distinctIds: Number(values['distinct-ids']),
  format: values.format,
  gzip: values.gzip,
  withUuid: values['with-uuid'],
});
console.error(`wrote ${Number(values.count).toLocaleString('en-US')} events to ${values.out} in ${((performance.now() - started) / 1000).toFixed(1)}s`);
