// TLS between Spate's processes and NATS (optional, docs/security.md): with a server that requires
// it, a deployable given NATS_TLS_CA connects and works; without the CA it cannot connect.
import { Kvm } from '@nats-io/kv';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadIngestConfig, startIngest } from '../../ingest/index.js';
import { connect } from '@nats-io/transport-node';
import { PROJECTS_BUCKET } from '../../lib/index.js';
import { startNats } from '../../test/kit/index.js';

describe('nats tls', () => {
  it('nats tls - an ingest node with NATS_TLS_CA captures through a NATS that requires TLS; without the CA the connection fails', async () => {
    await using nats = await startNats({ tls: true });
    expect(nats.caFile).toBeDefined();
    const varz = (await (await fetch(`${nats.node.monitorUrl}/varz`)).json()) as { tls_required?: boolean };
    expect(varz.tls_required).toBe(true);

    const operator = await nats.connect('tls-test');
    await (await new Kvm(operator).create(PROJECTS_BUCKET, { history: 1 })).put('phc_tls', JSON.stringify({ projectId: 1, organizationId: 'o' }));
    const node = await startIngest(loadIngestConfig({ ...nats.env('ingest'), CAPTURE_PORT: '0', PARSE_THREADS: '1' }), { log: pino({ level: 'silent' }) });
    try {
      const res = await fetch(`${node.url}/capture/`, { method: 'POST', body: JSON.stringify({ api_key: 'phc_tls', event: 'over tls', distinct_id: 'u' }) });
      expect(res.status).toBe(200);
    } finally {
      await node.stop();
    }
    // The server's certificate is signed by a CA the system does not trust: without NATS_TLS_CA
    // the handshake fails (one attempt here; connectNats would keep trying, as for a server not up yet).
    const { user, pass } = nats.credentials('ingest');
    const untrusted = await connect({ servers: nats.url, user, pass, tls: {} }).then(
      (nc) => nc.close().then(() => 'connected'),
      (err: unknown) => `${(err as Error).message} ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : ''}`,
    );
    expect(untrusted).toMatch(/certificate/i);
    await operator.close();
  });
});
