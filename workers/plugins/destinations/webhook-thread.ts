// Entry of the worker's webhook thread (webhooks.ts, WebhookSender): one task, one batch of a
// config's webhooks, sent by this thread's client while the worker's event loop composes the next.
import { workerData } from 'node:worker_threads';
import { pluginEgressPolicy } from '../host-ops.js';
import { WebhookClient, type SendResult, type WebhookRequest, type WebhookSettings } from './webhook-client.js';

export interface WebhookThreadData {
  egressAllow: string;
  settings: WebhookSettings;
}

export interface WebhookTask {
  configId: number;
  requests: WebhookRequest[];
  /** Set to 1 by the worker when the destination stops: requests not started yet are not sent. */
  stop: Int32Array;
}

const data = workerData as WebhookThreadData;
const client = new WebhookClient(pluginEgressPolicy(data.egressAllow), data.settings);

export default function sendWebhooks(task: WebhookTask): Promise<SendResult[]> {
  return client.sendAll(task.configId, task.requests, () => Atomics.load(task.stop, 0) === 1);
}
