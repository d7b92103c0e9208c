// deploy/k8s, checked statically (no cluster here): every manifest is valid against the Kubernetes
// API schema (kubernetes-models), and what the containers run, set, expose and probe agrees with the
// deployables' code, the image and the NATS chart values.
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { NATS_USERS } from '../../lib/index.js';
import {
  DEPLOYABLES,
  deployableOfCommand,
  effectivePort,
  envProblems,
  imageEnv,
  parseYaml,
  parseYamlDocuments,
  NATS_ROLE_OF,
  natsAuthUsers,
  natsPasswordVariable,
  REPLICA_SETTINGS,
  repoPath,
  runtimeValue,
  type Deployable,
} from '../../test/deploy-artifacts.js';
import { LIVENESS } from '../../test/multihost/topology.js';

interface Probe {
  httpGet?: { path: string; port: string | number };
}
interface Container {
  name: string;
  image: string;
  command?: string[];
  ports?: { name?: string; containerPort: number }[];
  env?: { name: string; value?: string; valueFrom?: unknown }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
  securityContext?: { readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean };
  volumeMounts?: { name: string; mountPath: string }[];
}
interface PodTemplate {
  metadata: { labels: Record<string, string>; annotations?: Record<string, string> };
  spec: { containers: Container[]; initContainers?: Container[]; securityContext?: { runAsNonRoot?: boolean; runAsUser?: number }; volumes?: { name: string }[] };
}
interface PolicyPeer {
  podSelector?: { matchLabels?: Record<string, string> };
  namespaceSelector?: { matchLabels?: Record<string, string> };
}
interface PolicyRule {
  ports?: { port: number }[];
  from?: PolicyPeer[];
}
interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec?: {
    podSelector?: { matchLabels?: Record<string, string> };
    policyTypes?: string[];
    ingress?: PolicyRule[];
    selector?: { matchLabels?: Record<string, string> } & Record<string, string>;
    template?: PodTemplate;
    ports?: { name: string; port: number; targetPort: string | number }[];
    scaleTargetRef?: { apiVersion: string; kind: string; name: string };
    minReplicas?: number;
    maxReplicas?: number;
  };
}

const K8S = 'deploy/k8s';
const kustomization = parseYaml(`${K8S}/kustomization.yaml`) as { namespace: string; resources: string[]; images: { name: string; newName: string; newTag: string }[] };
interface SecretRef {
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}
const natsValues = parseYaml(`${K8S}/nats-values.yaml`) as {
  config: { cluster: { replicas: number }; nats?: { port?: number } };
  container: { env: Record<string, string | SecretRef>; merge: { livenessProbe?: Probe & { failureThreshold?: number } } };
};
/** The pod labels of the nats chart's servers (its selector labels, release `nats`). */
const NATS_POD_LABELS = { 'app.kubernetes.io/name': 'nats', 'app.kubernetes.io/instance': 'nats' };

const files = kustomization.resources.filter((r) => r.endsWith('.yaml'));
const manifests: Manifest[] = files.flatMap((f) => parseYamlDocuments(`${K8S}/${f}`) as Manifest[]);
const byKind = (kind: string) => manifests.filter((m) => m.kind === kind);
const workloads = manifests.filter((m) => m.spec?.template !== undefined);

function deployableOf(container: Container): Deployable {
  const d = deployableOfCommand(container.command ?? []);
  if (!d) throw new Error(`${container.name} runs no deployable: ${container.command?.join(' ')}`);
  return d;
}

/** A container's environment; values Kubernetes fills in (Secrets, the pod's name) as placeholders. */
function envOf(c: Container): Record<string, string> {
  return Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value ?? runtimeValue(e.name)]));
}

const mainContainers = workloads.flatMap((w) => w.spec!.template!.spec.containers.map((c) => ({ workload: w, container: c })));

describe('kubernetes manifests', () => {
  beforeAll(() => {
    expect(manifests.length).toBeGreaterThan(5);
  });

  it('k8s - the kustomization lists manifests that exist, each valid against the Kubernetes API schema', async () => {
    for (const resource of kustomization.resources) {
      const path = repoPath(`${K8S}/${resource}`);
      expect(existsSync(path), resource).toBe(true);
      if (statSync(path).isDirectory()) expect(existsSync(join(path, 'kustomization.yaml')), resource).toBe(true);
    }
    for (const m of manifests) {
      const models = (await import(`kubernetes-models/${m.apiVersion}`)) as Record<string, new (data: unknown) => { validate(): void }>;
      const Model = models[m.kind];
      expect(Model, `${m.apiVersion} ${m.kind}`).toBeDefined();
      expect(() => new Model!(m).validate(), `${m.kind} ${m.metadata.name}`).not.toThrow();
      expect(m.metadata.labels?.['app.kubernetes.io/part-of'], `${m.kind} ${m.metadata.name}`).toBe('spate');
    }
    expect(byKind('Namespace').map((n) => n.metadata.name)).toEqual([kustomization.namespace]);
  });

  it('k8s - every container runs the spate image (set by the kustomization) and an entry file the build makes', () => {
    expect(kustomization.images).toEqual([expect.objectContaining({ name: 'spate', newName: expect.any(String), newTag: expect.any(String) })]);
    for (const w of workloads) {
      const spec = w.spec!.template!.spec;
      for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) {
        expect(c.image, `${w.metadata.name}/${c.name}`).toBe('spate');
        const command = c.command ?? [];
        const known = deployableOfCommand(command) !== undefined || command[1] === 'dist/deploy/docker/healthcheck.js';
        expect(known, `${w.metadata.name}/${c.name}: ${command.join(' ')}`).toBe(true);
      }
    }
    const ran = new Set(mainContainers.map(({ container }) => deployableOf(container).name));
    expect(ran).toEqual(new Set(['ingest', 'admin', 'workers', 'cli']));
  });

  it('k8s - every variable set for a container is a valid setting of the deployable it runs', () => {
    for (const { workload, container } of mainContainers) {
      expect(envProblems(deployableOf(container), envOf(container)), `${workload.metadata.name}/${container.name}`).toEqual([]);
    }
  });

  it('k8s - ports, probes and scrape annotations agree with the deployables', () => {
    for (const { workload, container } of mainContainers) {
      const d = deployableOf(container);
      const where = `${workload.metadata.name}/${container.name}`;
      const template = workload.spec!.template!;
      if (!d.port) {
        expect(container.ports, where).toBeUndefined();
        continue;
      }
      const port = effectivePort(d, { ...imageEnv(), ...envOf(container) });
      expect(container.ports?.map((p) => p.containerPort), where).toEqual([port]);
      const portName = container.ports![0]!.name;
      const probe = (p: Probe | undefined) => [p?.httpGet?.path, p?.httpGet?.port];
      expect(probe(container.readinessProbe), where).toEqual([d.health!.ready, portName]);
      expect(probe(container.livenessProbe), where).toEqual([d.health!.live, portName]);
      expect(probe(container.startupProbe), where).toEqual([d.health!.live, portName]);
      expect(template.metadata.annotations, where).toMatchObject({
        'prometheus.io/scrape': 'true',
        'prometheus.io/port': String(port),
        'prometheus.io/path': '/metrics',
      });
    }
    // The ingest readiness probe is /_ready, not /_health: a node without NATS leaves the Service.
    const ingest = mainContainers.find(({ container }) => deployableOf(container).name === 'ingest')!.container;
    expect(ingest.readinessProbe?.httpGet?.path).toBe('/_ready');
  });

  it('k8s - NATS pods are restarted by the liveness probe the multi-host rig runs (a hung JetStream, not a partition)', () => {
    const probe = natsValues.container.merge.livenessProbe;
    expect(probe?.httpGet?.path).toBe(LIVENESS.path);
    expect(probe?.httpGet?.port).toBe('monitor');
    expect(probe?.failureThreshold).toBe(LIVENESS.failures);
  });

  it('k8s - Services, the HPA and the PodDisruptionBudgets select the pods they are meant for', () => {
    const deployments = byKind('Deployment');
    for (const dep of deployments) {
      const labels = dep.spec!.template!.metadata.labels;
      expect(labels, dep.metadata.name).toMatchObject(dep.spec!.selector!.matchLabels!);
      const pdbs = byKind('PodDisruptionBudget').filter((p) => matches(p.spec!.selector!.matchLabels!, labels));
      expect(pdbs.map((p) => p.metadata.name), `PodDisruptionBudget of ${dep.metadata.name}`).toEqual([dep.metadata.name]);
    }
    for (const svc of byKind('Service')) {
      const selected = deployments.filter((d) => matches(svc.spec!.selector as Record<string, string>, d.spec!.template!.metadata.labels));
      expect(selected.map((d) => d.metadata.name), svc.metadata.name).toEqual([svc.metadata.name]);
      const names = selected[0]!.spec!.template!.spec.containers.flatMap((c) => c.ports?.map((p) => p.name) ?? []);
      for (const p of svc.spec!.ports!) expect(names, `${svc.metadata.name} targetPort`).toContain(p.targetPort);
    }
    const hpas = byKind('HorizontalPodAutoscaler');
    expect(hpas.map((h) => h.spec!.scaleTargetRef)).toEqual([{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'spate-ingest' }]);
    expect(hpas[0]!.spec!.minReplicas).toBeGreaterThanOrEqual(2);
    // Each ingest pod asks for CPU, or CPU utilisation (the HPA's signal) is undefined.
    const ingest = deployments.find((d) => d.metadata.name === 'spate-ingest')!.spec!.template!.spec.containers[0]!;
    expect(ingest.resources?.requests?.cpu).toBeDefined();
  });

  it('k8s - every Spate process reaches the nats chart Service, runs at R3, and ingest and workers agree on the shard count and stream partitions', () => {
    const natsUrl = `nats://nats:${natsValues.config.nats?.port ?? 4222}`;
    const shardCounts = new Set<string | undefined>();
    const partitions = new Set<string | undefined>();
    for (const { workload, container } of mainContainers) {
      const d = deployableOf(container);
      const env = envOf(container);
      expect(env.NATS_URL, workload.metadata.name).toBe(natsUrl);
      const replicas = REPLICA_SETTINGS[d.name];
      if (replicas) expect(env[replicas], `${workload.metadata.name} ${replicas}`).toBe(String(natsValues.config.cluster.replicas));
      if (d.name === 'ingest' || d.name === 'workers') shardCounts.add(env.SHARD_COUNT);
      if (d.name === 'ingest' || d.name === 'workers') partitions.add(env.STREAM_PARTITIONS);
    }
    expect(shardCounts.size).toBe(1);
    expect(partitions.size).toBe(1);
    expect(partitions.has(undefined)).toBe(false);
  });

  it('k8s - every container has CPU and memory requests and a memory limit; ingest parse threads match its CPU', () => {
    for (const w of workloads) {
      const spec = w.spec!.template!.spec;
      for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) {
        const where = `${w.metadata.name}/${c.name}`;
        expect(c.resources?.requests, where).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
        expect(c.resources?.limits?.memory, where).toBeDefined();
      }
    }
    const ingest = mainContainers.find(({ container }) => deployableOf(container).name === 'ingest')!.container;
    // Node sees the machine's cores, not the pod's: PARSE_THREADS must be set, to the CPU request.
    expect(envOf(ingest).PARSE_THREADS).toBe(ingest.resources!.requests!.cpu);
  });

  it('k8s - containers run unprivileged with a read-only root filesystem, writing only to mounted volumes', () => {
    for (const w of workloads) {
      const spec = w.spec!.template!.spec;
      expect(spec.securityContext, w.metadata.name).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
      const volumes = new Set((spec.volumes ?? []).map((v) => v.name));
      for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) {
        expect(c.securityContext, `${w.metadata.name}/${c.name}`).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
        for (const m of c.volumeMounts ?? []) expect(volumes, `${w.metadata.name}/${c.name} ${m.mountPath}`).toContain(m.name);
      }
    }
    // `spate admin bootstrap` writes its key file to the image's SPATE_DATA_DIR.
    const bootstrap = mainContainers.find(({ container }) => deployableOf(container).name === 'cli')!.container;
    expect(bootstrap.volumeMounts?.map((m) => m.mountPath)).toContain(imageEnv().SPATE_DATA_DIR);
  });

  it('k8s - each Spate process connects to NATS as its role\'s user, with the password the NATS pods get for that user', () => {
    const secretOf = (v: string | SecretRef | undefined) => (typeof v === 'object' ? v.valueFrom?.secretKeyRef : undefined);
    // nats-server reads every user's password from its environment and does not start without one.
    for (const user of natsAuthUsers()) expect(secretOf(natsValues.container.env[user.passwordVariable]), user.user).toMatchObject({ name: 'spate-nats' });
    for (const { workload, container } of mainContainers) {
      const role = NATS_ROLE_OF[deployableOf(container).name];
      const where = `${workload.metadata.name}/${container.name}`;
      const env = Object.fromEntries((container.env ?? []).map((e) => [e.name, e]));
      expect(env.NATS_USER?.value, where).toBe(NATS_USERS[role]);
      expect(natsAuthUsers().map((u) => u.user), where).toContain(env.NATS_USER?.value);
      expect(env.NATS_PASSWORD?.value, `${where}: a password belongs in a Secret`).toBeUndefined();
      expect(secretOf(env.NATS_PASSWORD as SecretRef), where).toEqual(secretOf(natsValues.container.env[natsPasswordVariable(role)]));
    }
  });

  it('k8s - the admin server and the workers get SPATE_SECRET_KEY from one Secret; nothing else gets it', () => {
    const refs = new Map<string, unknown>();
    for (const { workload, container } of mainContainers) {
      const e = container.env?.find((v) => v.name === 'SPATE_SECRET_KEY');
      const d = deployableOf(container).name;
      if (d === 'admin' || d === 'workers') {
        expect(e?.value, `${workload.metadata.name}: the key belongs in a Secret`).toBeUndefined();
        refs.set(d, (e?.valueFrom as SecretRef['valueFrom'])?.secretKeyRef);
      } else {
        expect(e, workload.metadata.name).toBeUndefined();
      }
    }
    expect(refs.get('admin')).toEqual({ name: 'spate-secret-key', key: 'SPATE_SECRET_KEY' });
    expect(refs.get('workers')).toEqual(refs.get('admin'));
  });

  it('k8s - NetworkPolicies: NATS clients only from Spate pods, routes only from NATS, each Spate port open to whom it serves, the rest denied', () => {
    const deny = byKind('NetworkPolicy').find((p) => Object.keys(p.spec!.podSelector?.matchLabels ?? {}).length === 0);
    expect(deny?.spec).toMatchObject({ policyTypes: ['Ingress'] });
    expect(deny?.spec?.ingress ?? []).toEqual([]);
    const stranger = { app: 'something-else' };
    for (const w of workloads) {
      const labels = w.spec!.template!.metadata.labels;
      expect(admitted(NATS_POD_LABELS, 4222, labels), `${w.metadata.name} reaches NATS`).toBe(true);
      expect(admitted(NATS_POD_LABELS, 6222, labels), `${w.metadata.name} cannot join the routes`).toBe(false);
    }
    expect(admitted(NATS_POD_LABELS, 4222, stranger)).toBe(false);
    expect(admitted(NATS_POD_LABELS, 4222, workloads[0]!.spec!.template!.metadata.labels, 'elsewhere')).toBe(false);
    expect(admitted(NATS_POD_LABELS, 6222, NATS_POD_LABELS)).toBe(true);
    expect(admitted(NATS_POD_LABELS, 8222, stranger, 'monitoring')).toBe(true);
    expect(admitted(NATS_POD_LABELS, 8222, stranger)).toBe(false);
    const podOf = (component: string) => workloads.find((w) => w.spec!.template!.metadata.labels['app.kubernetes.io/component'] === component)!;
    const portOf = (component: string) => podOf(component).spec!.template!.spec.containers[0]!.ports![0]!.containerPort;
    const labelsOf = (component: string) => podOf(component).spec!.template!.metadata.labels;
    // Capture is the public edge; the admin API serves the cluster; workers only Prometheus.
    expect(admitted(labelsOf('ingest'), portOf('ingest'), stranger, 'anywhere')).toBe(true);
    expect(admitted(labelsOf('admin'), portOf('admin'), stranger, 'ingress-nginx')).toBe(true);
    expect(admitted(labelsOf('workers'), portOf('workers'), stranger, 'monitoring')).toBe(true);
    expect(admitted(labelsOf('workers'), portOf('workers'), labelsOf('ingest'))).toBe(false);
    // Nothing else on a Spate pod.
    expect(admitted(labelsOf('ingest'), 9229, stranger)).toBe(false);
  });

  it('k8s - the bootstrap Job starts once the admin Service answers /_health', () => {
    const job = byKind('Job')[0]!;
    const wait = job.spec!.template!.spec.initContainers?.[0];
    expect(wait?.command?.slice(0, 4)).toEqual(['node', 'dist/deploy/docker/healthcheck.js', '--wait', expect.stringMatching(/^\d+$/)]);
    const url = new URL(wait!.command![4]!);
    const admin = byKind('Service').find((s) => s.metadata.name === url.hostname);
    expect(admin, url.hostname).toBeDefined();
    expect(admin!.spec!.ports!.map((p) => p.port)).toContain(Number(url.port));
    expect(url.pathname).toBe(DEPLOYABLES.admin.health!.live);
  });
});

/**
 * Whether the namespace's NetworkPolicies let a pod with `fromLabels` (in namespace `fromNamespace`)
 * reach `port` of a pod with `podLabels` in the spate namespace, as Kubernetes evaluates them: a
 * pod no policy selects accepts everything; a selected one only what a rule of a selecting policy allows.
 */
function admitted(podLabels: Record<string, string>, port: number, fromLabels: Record<string, string>, fromNamespace = 'spate'): boolean {
  const selecting = byKind('NetworkPolicy').filter((p) => matches(p.spec!.podSelector?.matchLabels ?? {}, podLabels) && p.spec!.policyTypes?.includes('Ingress'));
  if (selecting.length === 0) return true;
  const peerMatches = (peer: PolicyPeer) => {
    const namespaceOk = peer.namespaceSelector
      ? matches(peer.namespaceSelector.matchLabels ?? {}, { 'kubernetes.io/metadata.name': fromNamespace })
      : fromNamespace === 'spate';
    return namespaceOk && matches(peer.podSelector?.matchLabels ?? {}, fromLabels);
  };
  return selecting.some((p) =>
    (p.spec!.ingress ?? []).some((rule) => (!rule.ports || rule.ports.some((x) => x.port === port)) && (!rule.from || rule.from.some(peerMatches))),
  );
}

function matches(selector: Record<string, string>, labels: Record<string, string>): boolean {
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}
