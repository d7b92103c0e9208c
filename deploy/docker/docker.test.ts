// Docker cannot run on the development machines, so deploy/docker/Dockerfile is checked statically:
// it parses, its stages are the ones intended, everything it copies is in the build context, and
// what it runs, sets and exposes are files the build makes and settings and ports the code has.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { relative } from 'node:path';
import dockerignoreModule from '@balena/dockerignore';
import { DockerfileParser, type Copy, type Dockerfile, type Instruction } from 'dockerfile-ast';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  builtPath,
  DEPLOYABLES,
  deployableOfCommand,
  effectivePort,
  imageEnv,
  readRepoFile,
  repoPath,
  repoRoot,
} from '../../test/deploy-artifacts.js';

// The package is CommonJS (module.exports = factory) while its types declare an ES default export.
const dockerignore = dockerignoreModule as unknown as typeof dockerignoreModule.default;
const dockerfile: Dockerfile = DockerfileParser.parse(readRepoFile('deploy/docker/Dockerfile'));
const context = dockerignore({ ignorecase: false }).add(readRepoFile('.dockerignore'));
const inContext = (path: string) => !context.ignores(path);

interface Stage {
  name: string | undefined;
  instructions: Instruction[];
}

function stages(): Stage[] {
  const out: Stage[] = [];
  for (const instruction of dockerfile.getInstructions()) {
    if (instruction.getKeyword() === 'FROM') {
      const from = dockerfile.getFROMs().find((f) => f.getRange().start.line === instruction.getRange().start.line);
      out.push({ name: from?.getBuildStage() ?? undefined, instructions: [] });
    } else {
      out.at(-1)?.instructions.push(instruction);
    }
  }
  return out;
}

function stage(name: string): Stage {
  const found = stages().find((s) => s.name === name);
  if (!found) throw new Error(`no stage ${name}`);
  return found;
}

const keyword = (s: Stage, k: string) => s.instructions.filter((i) => i.getKeyword() === k);
const args = (i: Instruction) => i.getArguments().map((a) => a.getValue());

/** Files `tsc -p tsconfig.build.json` compiles, relative to the repository. */
let compiled: string[] = [];
beforeAll(() => {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const out = execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--listFilesOnly'], { cwd: repoRoot, encoding: 'utf8' });
  compiled = out
    .split('\n')
    .filter((f) => f.startsWith(repoRoot) && !f.includes('/node_modules/'))
    .map((f) => relative(repoRoot, f));
}, 120_000);

describe('docker image', () => {
  it('docker - the Dockerfile parses and builds in three stages from Node 20 on Debian bookworm slim', () => {
    expect(dockerfile.getComments().length).toBeGreaterThan(0);
    expect(stages().map((s) => s.name)).toEqual(['build', 'prod-deps', 'runtime']);
    const arg = dockerfile.getARGs().find((a) => a.getProperty()?.getName() === 'NODE_IMAGE');
    // Node 20 on bookworm, as developed and tested: the ingest node uses Node 20's internal HTTP parser module.
    expect(arg?.getProperty()?.getValue()).toMatch(/^node:20(\.\d+){0,2}-bookworm-slim(@sha256:[0-9a-f]{64})?$/);
    for (const from of dockerfile.getFROMs()) expect(from.getImageName()).toBe('${NODE_IMAGE}');
  });

  it('docker - the runtime stage holds production dependencies and dist only, and runs as an unprivileged user', () => {
    const prodInstall = keyword(stage('prod-deps'), 'RUN').map((i) => i.getArgumentsContent() ?? '');
    expect(prodInstall.some((c) => /\bnpm ci\b.*--omit=dev/.test(c))).toBe(true);
    const runtime = stage('runtime');
    // No install in the runtime stage: its node_modules is the production-only tree.
    expect(keyword(runtime, 'RUN').map((i) => i.getArgumentsContent() ?? '').filter((c) => /\bnpm\b/.test(c))).toEqual([]);
    const copies = keyword(runtime, 'COPY') as Copy[];
    const fromStages = copies.map((c) => [c.getFromFlag()?.getValue(), ...args(c)]);
    expect(fromStages).toContainEqual(['prod-deps', '/app/node_modules', './node_modules']);
    expect(fromStages).toContainEqual(['build', '/app/dist', './dist']);
    // package.json ("type": "module") is what makes Node run dist/**/*.js as ES modules.
    expect(fromStages).toContainEqual([undefined, 'package.json', './']);
    const users = keyword(runtime, 'USER').map((u) => args(u).join(' '));
    expect(users.at(-1)).toBe('node');
    expect(keyword(runtime, 'WORKDIR').map((w) => args(w)[0])).toEqual(['/app']);
  });

  it('docker - every file the Dockerfile copies from the build context exists and is in the context', () => {
    const stageNames = stages().map((s) => s.name);
    for (const copy of dockerfile.getCOPYs()) {
      const from = copy.getFromFlag()?.getValue();
      const sources = args(copy).filter((a) => !a.startsWith('--')).slice(0, -1);
      if (from !== undefined) {
        expect(stageNames, `COPY --from=${from}`).toContain(from);
        continue;
      }
      for (const source of sources) {
        if (source === '.') continue; // the whole context: the next test checks what it holds
        expect(existsSync(repoPath(source)), source).toBe(true);
        expect(inContext(source), `${source} is excluded by .dockerignore`).toBe(true);
      }
    }
    // The build stage's dist/ is what `npm run build` (tsc -p tsconfig.build.json, outDir dist) writes.
    const pkg = JSON.parse(readRepoFile('package.json')) as { scripts: Record<string, string> };
    expect(pkg.scripts.build).toBe('tsc -p tsconfig.build.json');
    expect(keyword(stage('build'), 'RUN').map((i) => i.getArgumentsContent())).toContain('npm run build');
  });

  it('docker - the build context holds every file the build compiles, and no tests, dependencies, output or data', () => {
    expect(compiled.length).toBeGreaterThan(20);
    for (const file of [...compiled, 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json']) {
      expect(inContext(file), `${file} is compiled but excluded by .dockerignore`).toBe(true);
    }
    const tracked = execFileSync('git', ['ls-files'], { cwd: repoRoot, encoding: 'utf8' }).split('\n').filter(Boolean);
    const tests = tracked.filter((f) => f.endsWith('.test.ts'));
    expect(tests.length).toBeGreaterThan(0);
    for (const file of tests) expect(inContext(file), file).toBe(false);
    for (const file of ['node_modules/pg/package.json', 'dist/ingest/main.js', '.data/cluster.json', '.git/HEAD', 'bench/results/run.json', 'README.md', 'test/kit/index.ts']) {
      expect(inContext(file), file).toBe(false);
    }
  });

  it('docker - the default command and the documented ones start entry files the build makes', () => {
    const cmd = dockerfile.getCMDs().at(-1);
    const command = JSON.parse(cmd?.getArgumentsContent() ?? 'null') as string[];
    expect(deployableOfCommand(command)?.name).toBe('ingest');
    // The header comment documents how to run each deployable; every dist path it names must exist.
    const documented = [...readRepoFile('deploy/docker/Dockerfile').matchAll(/\bdist\/[\w/-]+\.js\b/g)].map((m) => m[0]);
    expect(new Set(documented)).toEqual(new Set(Object.values(DEPLOYABLES).map((d) => builtPath(d.source))));
    for (const d of Object.values(DEPLOYABLES)) {
      expect(compiled, `${d.source} (→ ${builtPath(d.source)})`).toContain(d.source);
    }
    expect(compiled).toContain('deploy/docker/healthcheck.ts');
  });

  it('docker - ENV sets only settings of the deployables, valid ones, and EXPOSE lists their ports', () => {
    const env = imageEnv();
    expect(Object.keys(env).length).toBeGreaterThan(0);
    for (const [name, value] of Object.entries(env)) {
      const owners = Object.values(DEPLOYABLES).filter((d) => d.settings.has(name));
      expect(owners.length, `${name} is no setting of any deployable`).toBeGreaterThan(0);
      for (const d of owners) {
        const parsed = d.definition && Object.values(d.definition).find((s) => s.env === name)?.schema.safeParse(value);
        if (parsed) expect(parsed.success, `${name}=${value} for ${d.name}`).toBe(true);
      }
    }
    // Servers listen on every interface inside a container.
    expect(env).toMatchObject({ CAPTURE_HOST: '0.0.0.0', ADMIN_HOST: '0.0.0.0', WORKER_METRICS_HOST: '0.0.0.0' });
    const exposed = dockerfile.getInstructions().filter((i) => i.getKeyword() === 'EXPOSE').flatMap((i) => args(i).map(Number));
    const ports = (['ingest', 'admin', 'workers'] as const).map((n) => effectivePort(DEPLOYABLES[n], env));
    expect(new Set(exposed)).toEqual(new Set(ports));
    expect(ports).not.toContain(0);
  });
});
