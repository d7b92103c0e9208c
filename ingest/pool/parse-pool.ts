// Where a body is parsed: small plain bodies inline (a thread hop costs more than the parse),
// everything else — large or compressed — in a piscina pool, so the event loop never parses a
// large body (ARCHITECTURE.md, invariant 5).
import { randomUUID } from 'node:crypto';
import { BroadcastChannel } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { runtimeModule } from '../../lib/index.js';
import { CaptureError } from '../errors.js';
import type { IngestMetrics } from '../metrics.js';
import { isPlainJsonRequest, parseCaptureRequest, type ParsedRequest, type ParseLimits, type RequestMeta } from '../parse/index.js';
import type { TokenRegistry } from '../token-registry.js';
import type { ParseTask, ParseTaskResult, ParseThreadData } from './parse-task.js';
import { fromWire } from './parsed-wire.js';
import type { ReplicaMessage } from './registry-replica.js';

export interface ParsePoolOptions {
  threads: number;
  /** Old-generation heap of each thread, bytes. Lines are encoded off-heap and large payloads parsed
   * event by event, so a 20 MB batch needs far less; past it the thread is replaced and the body
   * answered 413, so no body can grow the node's memory without bound. */
  maxHeapBytes: number;
  inlineMaxBytes: number;
  limits: ParseLimits;
  /** Retry-After of the 503s a thread answers itself (RETRY_AFTER_SECONDS). */
  retryAfterSeconds: number;
}

export class ParsePool {
  private readonly pool: Piscina<ParseTask, ParseTaskResult>;
  private readonly channel: BroadcastChannel;
  private broadcastScheduled = false;
  private readonly parsedInline: { inc(): void };
  private readonly parsedInThread: { inc(): void };

  constructor(
    private readonly options: ParsePoolOptions,
    private readonly registry: TokenRegistry,
    private readonly metrics: IngestMetrics,
  ) {
    const channelName = `spate-registry-${randomUUID()}`;
    this.channel = new BroadcastChannel(channelName);
    this.channel.onmessage = (event) => {
      if ((event as { data: ReplicaMessage }).data.type === 'hello') this.scheduleBroadcast();
    };
    registry.onChange(() => this.scheduleBroadcast());
    this.parsedInline = metrics.parses.labels('inline');
    this.parsedInThread = metrics.parses.labels('thread');
    const entry = runtimeModule(import.meta.url, './parse-thread');
    this.pool = new Piscina({
      filename: entry.path,
      execArgv: entry.execArgv,
      minThreads: options.threads,
      maxThreads: options.threads,
      idleTimeout: Number.POSITIVE_INFINITY,
      workerData: { registryChannel: channelName, retryAfterSeconds: options.retryAfterSeconds } satisfies ParseThreadData,
      resourceLimits: { maxOldGenerationSizeMb: Math.max(16, Math.round(options.maxHeapBytes / 2 ** 20)), maxYoungGenerationSizeMb: 16 },
    });
  }

  get queueDepth(): number {
    return this.pool.queueSize;
  }

  /** Small plain-JSON bodies are parsed right here and answered synchronously (no promise hop). */
  parse(body: Uint8Array, meta: RequestMeta): ParsedRequest | Promise<ParsedRequest> {
    if (body.length <= this.options.inlineMaxBytes && isPlainJsonRequest(body, meta.query, meta.contentEncoding)) {
      this.parsedInline.inc();
      return parseCaptureRequest(body, meta, this.options.limits, this.registry.lookup, { transferable: false });
    }
    this.parsedInThread.inc();
    return this.parseInThread(body, meta);
  }

  private async parseInThread(body: Uint8Array, meta: RequestMeta): Promise<ParsedRequest> {
    const dedicated = body.byteOffset === 0 && body.buffer.byteLength === body.length ? body : Uint8Array.from(body);
    const task: ParseTask = {
      body: dedicated.buffer as ArrayBuffer,
      byteOffset: 0,
      byteLength: dedicated.length,
      meta,
      limits: this.options.limits,
      registryVersion: this.registry.currentVersion,
    };
    this.metrics.poolQueueDepth.set(this.pool.queueSize + 1);
    try {
      const result = await this.pool.run(task, { transferList: [task.body] }).catch((err: unknown) => {
        if ((err as { code?: string }).code !== 'ERR_WORKER_OUT_OF_MEMORY') throw err;
        throw new CaptureError('payload_too_large', 'payload too large to parse within PARSE_THREAD_MAX_HEAP', {}, { cause: err });
      });
      if (!result.ok) throw new CaptureError(result.code, result.detail, { attr: result.attr, headers: { ...result.headers } });
      return fromWire(result.parsed);
    } finally {
      this.metrics.poolQueueDepth.set(this.pool.queueSize);
    }
  }

  async close(): Promise<void> {
    this.channel.close();
    await this.pool.destroy();
  }

  private scheduleBroadcast(): void {
    if (this.broadcastScheduled) return;
    this.broadcastScheduled = true;
    setImmediate(() => {
      this.broadcastScheduled = false;
      this.channel.postMessage({ type: 'snapshot', snapshot: this.registry.snapshot() } satisfies ReplicaMessage);
    });
  }
}
