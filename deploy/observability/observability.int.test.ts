// Prometheus and Grafana files of deploy/observability: scrape targets match the services and
// ports of compose and Kubernetes, and every dashboard query is valid PromQL over metrics and labels
// that a real ingest node, admin server and worker export.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import type { SyntaxNode } from '@lezer/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, EVENT_LOOP_SAMPLE_MS, type Registry } from '../../lib/index.js';
import { startAdminFixture, type AdminFixture } from '../../test/admin/harness.js';
import { effectivePort, DEPLOYABLES, imageEnv, parseYaml, readRepoFile, repoPath } from '../../test/deploy-artifacts.js';
import { post, startIngestHarness, type IngestHarness } from '../../test/ingest-harness.js';
import { freshDatabase, TEST_SECRET_KEY, waitFor } from '../../test/kit/index.js';
import { loadWorkerConfig, startWorker, type Worker } from '../../workers/index.js';

interface ScrapeConfig {
  job_name: string;
  metrics_path?: string;
  static_configs?: { targets: string[] }[];
  dns_sd_configs?: { names: string[]; type: string; port: number }[];
  kubernetes_sd_configs?: { role: string; namespaces?: { names: string[] } }[];
  relabel_configs?: { source_labels?: string[]; regex?: string; action?: string; replacement?: string; target_label?: string }[];
}
interface ComposeService {
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
}
interface Panel {
  type: string;
  title: string;
  datasource?: { uid: string };
  targets?: { expr: string; datasource?: { uid: string } }[];
}

const compose = parseYaml('deploy/compose/compose.yaml') as { services: Record<string, ComposeService> };
const prometheus = parseYaml('deploy/observability/prometheus.yml') as { scrape_configs: ScrapeConfig[] };
const dashboard = JSON.parse(readRepoFile('deploy/observability/grafana/dashboards/spate.json')) as {
  uid: string;
  panels: Panel[];
  templating: { list: { name: string; type: string; query: string }[] };
};
const queries = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
const job = (name: string) => prometheus.scrape_configs.find((j) => j.job_name === name);
const composePort = (service: 'ingest' | 'admin' | 'workers') =>
  effectivePort(DEPLOYABLES[service], { ...imageEnv(), ...(compose.services[service]?.environment ?? {}) });

interface Family {
  type: string;
  labels: Set<string>;
}

/**
 * Metric families of a Prometheus text exposition: its TYPE lines, and the label names of their
 * samples. A family without samples yet (a counter nothing has counted) takes the label names the
 * process's registry declares (prom-client keeps them on the metric; its types do not say so).
 */
function families(text: string, registry?: Registry): Map<string, Family> {
  const out = new Map<string, Family>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (!type) continue;
    const declared = (registry?.getSingleMetric(type[1]!) as { labelNames?: string[] } | undefined)?.labelNames ?? [];
    out.set(type[1]!, { type: type[2]!, labels: new Set(declared) });
  }
  for (const line of text.split('\n')) {
    const sample = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? \S+/.exec(line);
    if (!sample || line.startsWith('#')) continue;
    const name = sample[1]!;
    const family = out.get(name) ?? out.get(name.replace(/_(bucket|sum|count)$/, ''));
    for (const m of (sample[2] ?? '').matchAll(/(\w+)="/g)) family?.labels.add(m[1]!);
  }
  return out;
}

/** Grafana's $__rate_interval is a macro, not PromQL: substitute a duration as Grafana does. */
const promql = (expr: string) => expr.replaceAll('$__rate_interval', '5m');

function nodes(root: SyntaxNode, name: string): SyntaxNode[] {
  const out: SyntaxNode[] = [];
  const cursor = root.cursor();
  do {
    if (cursor.name === name) out.push(cursor.node);
  } while (cursor.next() && cursor.from <= root.to && cursor.node !== root.nextSibling);
  return out.filter((n) => n.from >= root.from && n.to <= root.to);
}

/** Labels Prometheus adds to every scraped sample. */
const TARGET_LABELS = ['instance', 'job'];

let exported: Map<string, Family>;
let ingest: IngestHarness;
let admin: AdminFixture;
let worker: Worker;

beforeAll(async () => {
  // A real ingest node that has taken a request with one accepted and one dropped event, a real
  // worker that has processed the accepted one, and a real admin server that has answered a request.
  ingest = await startIngestHarness();
  await ingest.registerKey('phc_observability', 1);
  const res = await post(`${ingest.url}/batch/`, JSON.stringify({ api_key: 'phc_observability', batch: [{ event: 'a', distinct_id: 'u1' }, { event: 'b' }] }));
  expect(res.status).toBe(200);
  worker = await startWorker(
    loadWorkerConfig({ ...ingest.nats.env('worker'), SPATE_SECRET_KEY: TEST_SECRET_KEY, DATABASE_URL: await freshDatabase(), WORKER_DB_POOL_SIZE: '4', WORKER_LEASE_TTL: '3s' }),
    { logger: createLogger('worker', 'silent') },
  );
  const workerMetrics = () => fetch(`${worker.statusUrl}/metrics`).then((r) => r.text());
  await waitFor('the worker processed the accepted event', async () => /^spate_worker_events_processed_total\{[^}]*\} [1-9]/m.test(await workerMetrics()));
  admin = await startAdminFixture();
  expect((await admin.api('GET', '/api/organizations/')).status).toBe(401);
  exported = new Map([
    ...families(await (await fetch(`${ingest.url}/metrics`)).text(), ingest.node.metrics.registry),
    ...families((await admin.api('GET', '/metrics')).text),
    ...families(await workerMetrics(), worker.metrics.registry),
  ]);
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await ingest?.stop();
  await admin?.stop();
});

describe('prometheus and grafana', () => {
  it('observability - prometheus.yml scrapes every ingest and worker replica and admin on their ports, and NATS through its exporters', () => {
    expect(job('spate-ingest')?.dns_sd_configs).toEqual([{ names: ['ingest'], type: 'A', port: composePort('ingest') }]);
    expect(job('spate-workers')?.dns_sd_configs).toEqual([{ names: ['workers'], type: 'A', port: composePort('workers') }]);
    expect(job('spate-admin')?.static_configs).toEqual([{ targets: [`admin:${composePort('admin')}`] }]);
    for (const name of ['spate-ingest', 'spate-workers', 'spate-admin']) expect(job(name)?.metrics_path).toBe('/metrics');
    const exporters = Object.entries(compose.services).filter(([n]) => n.startsWith('nats-exporter-'));
    const exporterTargets = exporters.map(([n, s]) => `${n}:${/^-port=(\d+)$/.exec(s.command?.find((a) => a.startsWith('-port=')) ?? '')?.[1]}`);
    expect(exporters.length).toBe(3);
    expect(job('nats')?.static_configs).toEqual([{ targets: exporterTargets }]);
    expect(compose.services.prometheus?.volumes).toContain('../observability/prometheus.yml:/etc/prometheus/prometheus.yml:ro');
  });

  // `npm run setup` installs promtool (Debian's prometheus package); the real parser checks the
  // file, and a machine without it fails here rather than skipping.
  // (Debian's promtool is built without Kubernetes discovery, so only the compose file is checked.)
  it('observability - promtool accepts prometheus.yml', () => {
    try {
      execFileSync('promtool', ['--version'], { stdio: 'ignore' });
    } catch {
      throw new Error('promtool is not installed: run `npm run setup`');
    }
    const out = execFileSync('promtool', ['check', 'config', repoPath('deploy/observability/prometheus.yml')], { encoding: 'utf8' });
    expect(out).toContain('SUCCESS');
  });

  it('observability - prometheus-kubernetes.yml keeps the annotated Spate pods of the namespace, with the job names of compose', () => {
    const k8s = parseYaml('deploy/observability/prometheus-kubernetes.yml') as { scrape_configs: ScrapeConfig[] };
    const kustomization = parseYaml('deploy/k8s/kustomization.yaml') as { namespace: string };
    const spate = k8s.scrape_configs.find((j) => j.job_name === 'spate')!;
    expect(spate.kubernetes_sd_configs).toEqual([{ role: 'pod', namespaces: { names: [kustomization.namespace] } }]);
    const jobRule = spate.relabel_configs!.find((r) => r.target_label === 'job')!;
    expect(jobRule.source_labels).toEqual(['__meta_kubernetes_pod_label_app_kubernetes_io_component']);
    // The components of deploy/k8s map to the job names prometheus.yml uses, so one dashboard fits both.
    for (const component of ['ingest', 'admin', 'workers']) {
      expect(job(jobRule.replacement!.replace('$1', component)), component).toBeDefined();
    }
    const portRule = spate.relabel_configs!.find((r) => r.target_label === '__address__')!;
    expect(portRule.source_labels).toEqual(['__address__', '__meta_kubernetes_pod_annotation_prometheus_io_port']);
    expect('10.0.0.7:8000;8020'.replace(new RegExp(`^${portRule.regex!}$`), portRule.replacement!.replace(/\$(\d)/g, '$$$1'))).toBe('10.0.0.7:8020');
    const nats = k8s.scrape_configs.find((j) => j.job_name === 'nats')!;
    expect(nats.relabel_configs).toContainEqual({ source_labels: ['__meta_kubernetes_pod_container_port_name'], regex: 'prom-metrics', action: 'keep' });
    const values = parseYaml('deploy/k8s/nats-values.yaml') as { promExporter: { enabled: boolean } };
    expect(values.promExporter.enabled).toBe(true);
  });

  it('observability - Grafana provisioning uses the compose Prometheus and loads the dashboards folder compose mounts', () => {
    const ds = parseYaml('deploy/observability/grafana/provisioning/datasources/prometheus.yaml') as { datasources: { type: string; url: string }[] };
    const url = new URL(ds.datasources[0]!.url);
    expect([ds.datasources[0]!.type, url.hostname]).toEqual(['prometheus', 'prometheus']);
    expect(compose.services.prometheus?.ports).toContain(`${url.port}:${url.port}`);
    const providers = parseYaml('deploy/observability/grafana/provisioning/dashboards/spate.yaml') as { providers: { options: { path: string } }[] };
    const mounts = (compose.services.grafana?.volumes ?? []).map((v) => v.split(':'));
    const dashboards = mounts.find(([, target]) => target === providers.providers[0]!.options.path);
    expect(dashboards?.[0]).toBe('../observability/grafana/dashboards');
    expect(mounts.find(([, target]) => target === '/etc/grafana/provisioning')?.[0]).toBe('../observability/grafana/provisioning');
    expect(join(repoPath('deploy/compose'), dashboards![0]!)).toBe(repoPath('deploy/observability/grafana/dashboards'));
  });

  it('observability - the dashboard has the panels the issue asks for, each query valid PromQL on a chosen data source', () => {
    expect(dashboard.uid).toBe('spate-overview');
    expect(dashboard.templating.list).toContainEqual(expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }));
    const titles = dashboard.panels.map((p) => p.title.toLowerCase());
    for (const wanted of ['events accepted', 'dropped', 'publish latency', 'consumer lag per shard', 'events processed']) {
      expect(titles.some((t) => t.includes(wanted)), wanted).toBe(true);
    }
    expect(queries.length).toBeGreaterThan(15);
    for (const p of dashboard.panels.filter((p) => p.type !== 'row')) {
      expect(p.datasource?.uid, p.title).toBe('${datasource}');
      for (const t of p.targets ?? []) expect(t.datasource?.uid, p.title).toBe('${datasource}');
    }
    for (const q of queries) {
      const tree = parser.parse(promql(q.expr));
      const errors: string[] = [];
      tree.iterate({ enter: (n) => void (n.type.isError && errors.push(`at ${n.from}`)) });
      expect(errors, `${q.panel}: ${q.expr}`).toEqual([]);
    }
  });

  it('observability - the event-loop lag panel subtracts the interval the processes sample at (Node counts it in)', () => {
    const lag = queries.filter((q) => q.expr.includes('spate_nodejs_eventloop_lag_p99_seconds'));
    expect(lag).toHaveLength(1);
    expect(lag[0]!.expr).toContain(`- ${EVENT_LOOP_SAMPLE_MS / 1000},`);
  });

  it('observability - every dashboard query reads metrics and labels that ingest, admin and workers export', () => {
    expect(exported.get('spate_ingest_requests_total')?.labels).toEqual(new Set(['deployable', 'route', 'status']));
    expect(exported.get('spate_worker_consumer_lag_messages')?.labels).toEqual(new Set(['deployable', 'stream', 'shard']));
    for (const q of queries) {
      const expr = promql(q.expr);
      const root = parser.parse(expr).topNode;
      const familyOf = new Map<SyntaxNode, Family>();
      for (const selector of nodes(root, 'VectorSelector')) {
        const name = expr.slice(selector.firstChild!.from, selector.firstChild!.to);
        const family = exported.get(name) ?? exported.get(name.replace(/_(bucket|sum|count)$/, ''));
        expect(family, `${q.panel}: no metric ${name}`).toBeDefined();
        if (family!.type === 'histogram' && !exported.has(name)) expect(name, q.panel).toMatch(/_(bucket|sum|count)$/);
        familyOf.set(selector, family!);
        for (const label of nodes(selector, 'LabelName')) {
          const l = expr.slice(label.from, label.to);
          expect([...family!.labels, ...TARGET_LABELS], `${q.panel}: ${name} has no label ${l}`).toContain(l);
        }
      }
      // `by (…)` labels must be on every series the aggregation reads.
      for (const aggregate of nodes(root, 'AggregateExpr')) {
        const grouping = nodes(aggregate, 'GroupingLabels')[0];
        if (!grouping || grouping.parent?.parent !== aggregate) continue;
        const labels = grouping.getChildren('LabelName').map((n) => expr.slice(n.from, n.to));
        for (const selector of nodes(aggregate, 'VectorSelector')) {
          const family = familyOf.get([...familyOf.keys()].find((k) => k.from === selector.from)!)!;
          for (const l of labels) expect([...family.labels, ...TARGET_LABELS], `${q.panel}: by (${l})`).toContain(l);
        }
      }
    }
  });
});
