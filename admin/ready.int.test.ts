// GET /_ready: 200 while NATS is connected and PostgreSQL answers; 503 naming the failing
// dependency otherwise, so a load balancer or Kubernetes takes the replica out of rotation.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../test/kit/index.js';
import { startAdminFixture } from '../test/admin/harness.js';

describe('admin readiness', () => {
  it('ready - follows NATS going away and coming back, without a key', async () => {
    await using f = await startAdminFixture();
    const ready = async () => {
      const res = await fetch(`${f.url}/_ready`);
      return { status: res.status, body: (await res.json()) as { ready: boolean; checks: Record<string, boolean> } };
    };
    expect(await ready()).toEqual({ status: 200, body: { ready: true, checks: { nats: true, postgres: true } } });
    await f.nats.node.stop();
    await waitFor('not ready while NATS is down', async () => (await ready()).status === 503);
    expect((await ready()).body).toEqual({ ready: false, checks: { nats: false, postgres: true } });
    expect((await fetch(`${f.url}/_health`)).status).toBe(200); // alive, just not ready
    await f.nats.node.start();
    await waitFor('ready again', async () => (await ready()).status === 200, 30_000);
  });
});
