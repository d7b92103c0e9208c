// Where a body is parsed: small plain bodies inline (a thread hop costs more than the parse),
// everything else — large or compressed — in a piscina pool, so the event loop never parses a
// large body (ARCHITECTURE.md, invariant 5).
import { randomUUID } from 'node:crypto';
import { BroadcastChannel } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { runtimeModule } from '../../lib/index.js';
import { CaptureError } from '../errors.js';
import { Reservation, SharedBudget } from '../inflight-budget.js';
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
  /** Bodies waiting for a thread (PARSE_QUEUE_MAX); past it, 503. Default: no bound. */
  maxQueue?: number;
  /** The node's in-flight budget: threads take decoded and output bytes from it. Default: none. */
  budget?: SharedBudget;
}

/**
 * Young generation of each parse thread. A batch of 1,000 events makes a few MB of short-lived
 * objects (each event parsed, normalised, stringified): with 16 MB they were scavenged often and
 * V8's GC helper threads took ~1.3 µs per event. 64 MB: ingest CPU per event on /batch/ of 1,000
 * 9.62 → 8.90 and 9.26 → 8.46 µs in two same-run A/Bs (bench/compare-ingest.ts, 2026-11-28).
 * The old generation, where whatever a large body keeps alive ends up, is still maxHeapBytes.
 * V8 makes of this two semi-spaces of 32 MB (a third each, rounded up to a power of two) and 32 MB
 * for new large objects: up to 96 MB a thread (24 MB at 16), which docs/operations.md counts.
 */
const PARSE_THREAD_YOUNG_GENERATION_MB = 64;

export class ParsePool {
  private readonly pool: Piscina<ParseTask, ParseTaskResult>;
  private readonly channel: BroadcastChannel;
  private broadcastScheduled = false;
  private readonly parsedInline: { inc(): void };
  private readonly parsedInThread: { inc(): void };
  private readonly budget: SharedBudget;

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
    this.parsedInline = metrics.parses.of('inline');
    this.parsedInThread = metrics.parses.of('thread');
    this.budget = options.budget ?? new SharedBudget(Number.MAX_SAFE_INTEGER);
    const entry = runtimeModule(import.meta.url, './parse-thread');
    this.pool = new Piscina({
      filename: entry.path,
      execArgv: entry.execArgv,
      minThreads: options.threads,
      maxThreads: options.threads,
      idleTimeout: Number.POSITIVE_INFINITY,
      maxQueue: options.maxQueue ?? Number.POSITIVE_INFINITY,
      workerData: {
        registryChannel: channelName,
        retryAfterSeconds: options.retryAfterSeconds,
        budget: this.budget.shared,
        budgetLimit: this.budget.limit,
      } satisfies ParseThreadData,
      resourceLimits: { maxOldGenerationSizeMb: Math.max(16, Math.round(options.maxHeapBytes / 2 ** 20)), maxYoungGenerationSizeMb: PARSE_THREAD_YOUNG_GENERATION_MB },
    });
  }

  get queueDepth(): number {
    return this.pool.queueSize;
  }

  /**
   * Small plain-JSON bodies are parsed right here and answered synchronously (no promise hop).
   * What parsing allocates (decoded payload, output) is taken from the budget into `reservation`.
   */
  parse(body: Uint8Array, meta: RequestMeta, reservation = new Reservation(this.budget)): ParsedRequest | Promise<ParsedRequest> {
    if (body.length <= this.options.inlineMaxBytes && isPlainJsonRequest(body, meta.query, meta.contentEncoding)) {
      this.parsedInline.inc();
      return parseCaptureRequest(body, meta, this.options.limits, this.registry.lookup, {
        transferable: false,
        reserve: (n) => reservation.grow(n),
        unreserve: (n) => void reservation.resize(reservation.held - n),
      });
    }
    this.parsedInThread.inc();
    return this.parseInThread(body, meta, reservation);
  }

  private async parseInThread(body: Uint8Array, meta: RequestMeta, reservation: Reservation): Promise<ParsedRequest> {
    const dedicated = body.byteOffset === 0 && body.buffer.byteLength === body.length ? body : Uint8Array.from(body);
    const task: ParseTask = {
      body: dedicated.buffer as ArrayBuffer,
      byteOffset: 0,
      byteLength: dedicated.length,
      meta,
      limits: this.options.limits,
      registryVersion: this.registry.currentVersion,
      heldByRequest: reservation.held,
      reserved: new SharedArrayBuffer(8),
    };
    this.metrics.poolQueueDepth.set(this.pool.queueSize + 1);
    try {
      const result = await this.pool.run(task, { transferList: [task.body] }).catch((err: unknown) => {
        if ((err as Error).message === 'Task queue is at limit') {
          throw new CaptureError('overloaded', 'ingest node is at capacity (parse queue), please retry', { headers: { 'Retry-After': String(this.options.retryAfterSeconds) } });
        }
        if ((err as { code?: string }).code !== 'ERR_WORKER_OUT_OF_MEMORY') throw err;
        throw new CaptureError('payload_too_large', 'payload too large to parse within PARSE_THREAD_MAX_HEAP', {}, { cause: err });
      });
      if (!result.ok) {
        const headers = result.code === 'overloaded' ? { 'Retry-After': String(this.options.retryAfterSeconds), ...result.headers } : { ...result.headers };
        throw new CaptureError(result.code, result.detail, { attr: result.attr, headers });
      }
      return fromWire(result.parsed);
    } finally {
      // Whatever the thread took (also if it failed or died) is this request's until it ends.
      reservation.adopt(Number(Atomics.load(new BigInt64Array(task.reserved), 0)));
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
