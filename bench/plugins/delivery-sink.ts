// The destination of the delivery benchmark (bench/plugins/delivery.ts): a uWS server that reads
// each request's body and answers 200, counting requests and events (a request carries the
// events its `X-Events` header says, else one). It records when the count passed each hundredth
// of what it was told to expect, so a rate is measured where the deliveries happen, the same way
// for Spate and for the ceiling. Prints {"port":N} on stdout when listening.
//   POST /_reset?expect=N   forget the counts; expect N events
//   GET  /_count            {"requests","events","marks":[ms at 1 %, 2 %, …]}
import { parseBenchArgs } from '../lib/cli.js';
import { uws } from '../lib/uws.js';

parseBenchArgs(
  `usage: node dist/bench/plugins/delivery-sink.js

The plugin delivery benchmark's HTTP destination (started by bench/plugins/delivery.ts): answers
every request 200 and counts its events (header X-Events, else 1). POST /_reset?expect=N,
GET /_count. Prints {"port":N} on stdout when listening.

  -h, --help    this text`,
  { options: {} },
);

let requests = 0;
let events = 0;
let step = Infinity;
let marks: number[] = [];

const app = uws.App();
app.post('/_reset', (res, req) => {
  const expect = Number(new URLSearchParams(req.getQuery() ?? '').get('expect'));
  requests = 0;
  events = 0;
  marks = [];
  step = expect > 0 ? expect / 100 : Infinity;
  res.end('{}');
});
app.get('/_count', (res) => {
  res.writeHeader('content-type', 'application/json').end(JSON.stringify({ requests, events, marks }));
});
app.any('/*', (res, req) => {
  const n = Number(req.getHeader('x-events')) || 1;
  res.onAborted(() => undefined);
  res.onData((_chunk, isLast) => {
    if (!isLast) return;
    requests++;
    events += n;
    while (events >= (marks.length + 1) * step) marks.push(performance.timeOrigin + performance.now());
    res.end('ok');
  });
});
app.listen('127.0.0.1', Number(process.env.PORT ?? 0), (socket) => {
  if (!socket) process.exit(1);
  console.log(JSON.stringify({ port: uws.us_socket_local_port(socket) }));
});
