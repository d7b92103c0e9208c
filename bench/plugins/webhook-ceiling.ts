// The ceiling of the plugin delivery benchmark (bench/plugins/delivery.ts): the requests a case's
// plugin makes for the same events, sent straight to the destination from a process of their own,
// with the worker's client and settings (undici, PLUGIN_WEBHOOK_CONNECTIONS per origin,
// PLUGIN_WEBHOOK_PIPELINING, PLUGIN_WEBHOOK_IN_FLIGHT at once). The requests are built before the
// first is sent; the benchmark measures at the destination. Prints {"done":N} when all answered.
import { Agent } from 'undici';
import { parseBenchArgs } from '../lib/cli.js';
import { DELIVERY_CASES } from './delivery-cases.js';

const USAGE = `usage: node dist/bench/plugins/webhook-ceiling.js

Started by bench/plugins/delivery.ts. Environment: SINK_URL, CASE (index into DELIVERY_CASES),
EVENTS, CONNECTIONS, PIPELINING, IN_FLIGHT.

  -h, --help    this text`;
parseBenchArgs(USAGE, { options: {} });

const sink = new URL(process.env.SINK_URL ?? '');
const deliveryCase = DELIVERY_CASES[Number(process.env.CASE)];
if (!deliveryCase) throw new Error(`no case ${process.env.CASE}`);
const requests = deliveryCase.requests(Number(process.env.EVENTS));
const agent = new Agent({ connections: Number(process.env.CONNECTIONS), pipelining: Number(process.env.PIPELINING) });
const inFlight = Number(process.env.IN_FLIGHT);

function send(r: (typeof requests)[number]): Promise<number> {
  return new Promise((resolve, reject) => {
    let status = 0;
    agent.dispatch(
      { origin: sink.origin, path: r.path, method: 'POST', headers: r.headers, body: r.body, idempotent: true },
      {
        onConnect() {
          // Nothing to set up.
        },
        onHeaders(code) {
          status = code;
          return true;
        },
        onData() {
          return true;
        },
        onComplete() {
          resolve(status);
        },
        onError: reject,
      },
    );
  });
}

// CPU of sending only (the requests are built by now).
const started = process.cpuUsage();
let next = 0;
async function lane(): Promise<void> {
  while (next < requests.length) {
    const status = await send(requests[next++]!);
    if (status !== 200) throw new Error(`the sink answered ${status}`);
  }
}
await Promise.all(Array.from({ length: inFlight }, lane));
await agent.close();
const cpu = process.cpuUsage(started);
console.log(JSON.stringify({ done: requests.length, cpuSeconds: (cpu.user + cpu.system) / 1e6 }));
