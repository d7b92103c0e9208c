// Ceiling: the fastest a uWS server on this machine answers a capture-sized POST. It reads the
// body and answers 200 {"status":1}, nothing else. Prints its port on stdout.
import { uws } from '../lib/uws.js';
import { parseBenchArgs } from '../lib/cli.js';

parseBenchArgs(
  `usage: node dist/bench/ceilings/trivial-uws.js

The benchmark's HTTP ceiling (started by \`npm run bench\`): a uWS server that reads each request's
body and answers 200 {"status":1}, nothing else. Prints {"port":N} on stdout when listening.
Environment: PORT (default 0: any free port).

  -h, --help    this text`,
  { options: {} },
);

const app = uws.App();
app.any('/*', (res) => {
  res.onAborted(() => undefined);
  res.onData((_chunk, isLast) => {
    if (isLast) res.end('{"status":1}');
  });
});
app.listen('127.0.0.1', Number(process.env.PORT ?? 0), (socket) => {
  if (!socket) process.exit(1);
  console.log(JSON.stringify({ port: uws.us_socket_local_port(socket) }));
});
