import { RetentionPolicy } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { parsePipelineSubject, pipelineStreamConfig, pipelineSubject, PIPELINE_STREAMS } from './pipeline.js';

describe('pipeline contracts', () => {
  it('pipeline - subjects are <prefix>.<teamId>.<id> and parse back', () => {
    expect(pipelineSubject('pluginLogs', 7, 12)).toBe('plugin_logs.7.12');
    expect(pipelineSubject('batchExportRuns', 1, 'abc')).toBe('batch_export_runs.1.abc');
    expect(parsePipelineSubject('pluginLogs', 'plugin_logs.7.12')).toEqual({ teamId: 7, id: '12' });
    expect(parsePipelineSubject('pluginLogs', 'batch_export_logs.7.12')).toBeUndefined();
    expect(parsePipelineSubject('pluginLogs', 'plugin_logs.x.12')).toBeUndefined();
    expect(parsePipelineSubject('pluginLogs', 'plugin_logs.7.12.9')).toBeUndefined();
  });

  it('pipeline - reports to the admin server are work queues; requests are kept until they age out', () => {
    const limits = { replicas: 3, maxBytes: 1024, requestMaxAgeMs: 1000, duplicateWindowMs: 500 };
    const logs = pipelineStreamConfig('pluginLogs', limits);
    expect(logs).toMatchObject({ name: 'PLUGIN_LOGS', subjects: ['plugin_logs.>'], retention: RetentionPolicy.Workqueue, num_replicas: 3, max_age: 0 });
    const backfills = pipelineStreamConfig('batchExportBackfills', limits);
    expect(backfills).toMatchObject({ retention: RetentionPolicy.Limits, max_age: 1_000_000_000, duplicate_window: 500_000_000 });
    expect(new Set(Object.values(PIPELINE_STREAMS).map((s) => s.prefix)).size).toBe(5);
  });
});
