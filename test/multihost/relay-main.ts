// The relay as a process, run inside a rig namespace:
//   node --import tsx relay-main.ts '<routes JSON>' [control socket path]
// Prints one JSON line when listening ({"addresses": [...]}). A connection to the control socket
// sends one JSON line ({"delayMs": 200, "jitterMs": 50}) that reshapes every connection at once,
// and gets {"shaped": {...}} back. SIGTERM closes it.
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { startRelay, type LinkShape, type RelayRoute } from './relay.js';

const routes = JSON.parse(process.argv[2] ?? '[]') as RelayRoute[];
const controlPath = process.argv[3];
for (const r of routes) if ('path' in r.listen) rmSync(r.listen.path, { force: true });
const relay = await startRelay(routes);

if (controlPath) {
  rmSync(controlPath, { force: true });
  const control = createServer((socket) => {
    socket.on('error', () => undefined);
    createInterface({ input: socket }).once('line', (line) => {
      try {
        const shape = JSON.parse(line) as LinkShape;
        relay.shape(shape);
        socket.end(`${JSON.stringify({ shaped: shape })}\n`);
      } catch (err) {
        socket.end(`${JSON.stringify({ error: String(err) })}\n`);
      }
    });
  });
  await new Promise<void>((resolve) => control.listen(controlPath, resolve));
}
process.stdout.write(`${JSON.stringify({ addresses: relay.addresses })}\n`);

process.once('SIGTERM', () => {
  void relay.close().finally(() => process.exit(0));
});
