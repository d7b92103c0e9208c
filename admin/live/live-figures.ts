// The live page's figures: the processes' /metrics (events in and processed, lag, shards), the
// event streams' sizes and the delivery side's activity, sampled when a page asks and at most
// once per half refresh however many pages ask. Rates are counter deltas between two samples.
// Everything here is a number: no names, keys, ids or addresses (those are in ./details.ts,
// behind a personal API key).
import type { Logger } from '../../lib/index.js';
import type { Queryable } from '../db/pool.js';
import { activityCounts, type ActivityCounts } from '../store/pipeline-activity.js';
import { scrapeProcesses, type ProcessMetrics, type ProcessRole } from './process-metrics.js';
import { type StreamSizes, type StreamSize } from './stream-sizes.js';

export interface ProcessFigures {
  /** "ingest 1", "worker 2": its place among the configured processes of its role. */
  name: string;
  role: ProcessRole;
  up: boolean;
  /** Events accepted (ingest) or processed (worker) per second since the last sample. */
  perSecond: number | null;
  /** Workers: the shards it runs. */
  shards: number[];
}

export interface HistoryPoint {
  at: number;
  in: number | null;
  processed: number | null;
}

export interface Figures {
  at: number;
  refreshMs: number;
  /** Configured metrics targets (CLUSTER_METRICS_URLS): 0 means no rates, lag or workers. */
  targets: number;
  rates: { in: number | null; processed: number | null };
  history: HistoryPoint[];
  /** Messages not yet processed, per shard (every stream), as the workers report them. */
  lag: { shard: number; messages: number }[];
  streams: StreamSize[];
  processes: ProcessFigures[];
  activity: ActivityCounts | null;
}

export interface LiveSources {
  metricsUrls: readonly string[];
  streams: StreamSizes;
  db: Queryable;
  log: Logger;
  refreshMs: number;
}

/** Five minutes of history at the fastest sampling rate. */
const HISTORY_SECONDS = 300;

interface Sample {
  at: number;
  byUrl: Map<string, ProcessMetrics>;
}

export class LiveFigures {
  private previous: Sample | undefined;
  private readonly history: HistoryPoint[] = [];
  /** The role each target had when last seen up: a process that is down keeps its place. */
  private readonly roles = new Map<string, ProcessRole>();
  private latest: Figures | undefined;
  private sampling: Promise<Figures> | undefined;

  constructor(private readonly sources: LiveSources) {}

  /** The process URLs by their public names ("ingest 1" → http://…), for the details a key may see. */
  processUrls(): Record<string, string> {
    return Object.fromEntries(this.named().map(([name, url]) => [name, url]));
  }

  async figures(now = Date.now()): Promise<Figures> {
    if (this.latest && now - this.latest.at < this.sources.refreshMs / 2) return this.latest;
    this.sampling ??= this.sample().finally(() => (this.sampling = undefined));
    return this.sampling;
  }

  private named(): [name: string, url: string, role: ProcessRole][] {
    const counts = new Map<ProcessRole, number>();
    return this.sources.metricsUrls.map((url) => {
      const role = this.roles.get(url) ?? 'unknown';
      const n = (counts.get(role) ?? 0) + 1;
      counts.set(role, n);
      return [`${role === 'unknown' ? 'process' : role} ${n}`, url, role];
    });
  }

  private async sample(): Promise<Figures> {
    const { metricsUrls, streams: streamSizes, db, log } = this.sources;
    const [processes, streams, activity] = await Promise.all([
      scrapeProcesses(metricsUrls),
      streamSizes.read(),
      activityCounts(db).catch((err: unknown) => {
        log.warn({ err }, 'live page: reading export runs and plugin errors failed');
        return null;
      }),
    ]);
    const at = Date.now();
    const byUrl = new Map(processes.map((p) => [p.url, p]));
    for (const p of processes) if (p.up) this.roles.set(p.url, p.role);

    const previous = this.previous;
    const seconds = previous ? (at - previous.at) / 1000 : 0;
    /** A counter's increase since the last sample (a restarted process starts again from 0). */
    const increase = (url: string, pick: (m: ProcessMetrics) => number): number | null => {
      const now = byUrl.get(url);
      const before = previous?.byUrl.get(url);
      if (!now?.up || !before?.up) return null;
      const delta = pick(now) - pick(before);
      return delta >= 0 ? delta : pick(now);
    };
    const rate = (url: string, pick: (m: ProcessMetrics) => number) => {
      const delta = increase(url, pick);
      return delta === null || seconds <= 0 ? null : delta / seconds;
    };
    const total = (role: ProcessRole, pick: (m: ProcessMetrics) => number): number | null => {
      const rates = metricsUrls.filter((u) => this.roles.get(u) === role).map((u) => rate(u, pick));
      const known = rates.filter((r): r is number => r !== null);
      return known.length === 0 ? null : known.reduce((a, b) => a + b, 0);
    };
    const rates = { in: total('ingest', (m) => m.eventsAccepted), processed: total('worker', (m) => m.eventsProcessed) };
    this.previous = { at, byUrl };
    if (seconds > 0) {
      this.history.push({ at, ...rates });
      const keep = Math.ceil(HISTORY_SECONDS / Math.max(0.5, this.sources.refreshMs / 2000));
      if (this.history.length > keep) this.history.splice(0, this.history.length - keep);
    }

    const lag = new Map<number, number>();
    for (const p of processes) for (const [shard, messages] of p.lagByShard) lag.set(shard, (lag.get(shard) ?? 0) + messages);
    const figures: Figures = {
      at,
      refreshMs: this.sources.refreshMs,
      targets: metricsUrls.length,
      rates,
      history: [...this.history],
      lag: [...lag].sort((a, b) => a[0] - b[0]).map(([shard, messages]) => ({ shard, messages })),
      streams,
      processes: this.named().map(([name, url, role]) => {
        const p = byUrl.get(url)!;
        return { name, role, up: p.up, perSecond: rate(url, role === 'worker' ? (m) => m.eventsProcessed : (m) => m.eventsAccepted), shards: p.shards };
      }),
      activity,
    };
    this.latest = figures;
    return figures;
  }
}
