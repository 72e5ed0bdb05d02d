// Data flows one way: http → core → runtime / engine / store, and inside core from its top folders down to
// its bottom ones (CORE_ORDER). This test reads every import (type-only ones too) under src/ and fails,
// naming file and import, when one runs against the flow.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const SRC = resolve(import.meta.dirname, '..', '..', 'src');

/** Which top-level folders of src/ a folder may not import from. The composition root (src/*.ts) is free. */
const FORBIDDEN: Record<string, readonly string[]> = {
  http: ['runtime', 'store', 'gateway'],
  core: ['http', 'gateway'],
  engine: ['core', 'http', 'gateway'],
  runtime: ['core', 'http', 'gateway'],
  store: ['core', 'http', 'gateway'],
  // The model gateway and egress proxy (a listener of its own): only the composition root starts it.
  gateway: ['http'],
  metrics: ['gateway'],
  'offline-model': ['gateway'],
};

/**
 * The composition root (main.ts, server.ts and the named builders of src/composition/) may import anything,
 * and only main.ts and server.ts import the builders; the other files directly in src/ (config, errors,
 * units…) are leaves.
 */
const COMPOSITION_ROOT = new Set(['main.ts', 'server.ts']);
const COMPOSITION = 'composition';
const LEAF_FORBIDDEN = ['core', 'http', 'runtime', 'store', 'engine', 'gateway', COMPOSITION];

/**
 * The order of core's folders and of the files directly in core, from the bottom up: each may import only
 * what stands below it. At the bottom the vocabulary (a run's request, plan and phases, the compose file's
 * definition), then what the containers are built from (grants, engine access, validation, session
 * directories, images), the engine containers every use shares, and on them what runs and agents use
 * (workspaces, compose stacks, the pool), the runs, the agents, the jobs, and the service's own status.
 */
export const CORE_ORDER: readonly string[] = [
  'settling.ts',
  'runtime-errors.ts',
  'runtime-outage.ts',
  'run-phases.ts',
  'run-request.ts',
  'compose-file',
  'run-plan.ts',
  // This node's registration on a shared database: nothing of core below it.
  'cluster',
  'auth',
  'events',
  'webhooks',
  'gateway',
  'engine-access.ts',
  'validation',
  'sessions',
  'images',
  'containers',
  'workspaces',
  'compose',
  'pool',
  'runs',
  'agents',
  'jobs',
  'system-status.ts',
  'shutdown.ts',
  'reaper.ts',
];

/** Where a file of src/core stands in CORE_ORDER: its folder under core, or its own name when directly in core. */
function coreUnitOf(file: string): string | undefined {
  const parts = relative(SRC, file).split('/');
  if (parts[0] !== 'core' || parts.length < 2) return undefined;
  return parts.length > 2 ? parts[1]! : parts[1]!.replace(/\.js$/, '.ts');
}

/** An import from one part of core to another that does not stand below it in CORE_ORDER (or is not in it). */
function againstCoreOrder(from: string, to: string): string | undefined {
  const fromUnit = coreUnitOf(from);
  const toUnit = coreUnitOf(to);
  if (fromUnit === undefined || toUnit === undefined || fromUnit === toUnit) return undefined;
  const fromRank = CORE_ORDER.indexOf(fromUnit);
  const toRank = CORE_ORDER.indexOf(toUnit);
  if (fromRank < 0) return `${fromUnit} is not in core's order`;
  if (toRank < 0) return `${toUnit} is not in core's order`;
  return toRank > fromRank ? `${toUnit} stands above ${fromUnit} in core's order` : undefined;
}

/**
 * Inside runtime/: the ports (runtime/ports/) are Berth's own terms, so a port imports only other ports and
 * the container policy; Podman is known only to runtime/podman/ itself and to the composition root, which
 * builds the one implementation (core depends on the ports, never on Podman's client or JSON).
 */
function againstRuntimeSeams(from: string, to: string): string | undefined {
  const [fromTop, fromSub] = relative(SRC, from).split('/');
  const [toTop, toSub] = relative(SRC, to).split('/');
  if (toTop !== 'runtime') return undefined;
  const composition = layerOf(from) === '' || fromTop === 'composition';
  if (fromTop === 'runtime' && fromSub === 'ports' && toSub !== 'ports' && toSub !== 'container-policy.js') return 'a port imports only ports and the container policy';
  if (toSub === 'podman' && !(fromTop === 'runtime' && fromSub === 'podman') && !composition) return 'only runtime/podman/ and the composition root know Podman';
  return undefined;
}

/** The folder of src/ a file belongs to: '' for the composition root, 'leaf' for other files directly in src/. */
function layerOf(file: string): string {
  const parts = relative(SRC, file).split('/');
  if (parts.length > 1) return parts[0]!;
  return COMPOSITION_ROOT.has(parts[0]!) ? '' : 'leaf';
}

/** Every module specifier of `import … from`, `export … from`, `import type` and dynamic `import()`. */
function specifiersOf(source: string): string[] {
  const specifiers: string[] = [];
  const pattern = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s*['"]([^'"]+)['"]/gm;
  for (const match of source.matchAll(pattern)) {
    const specifier = match[1] ?? match[2] ?? match[3];
    if (specifier !== undefined) specifiers.push(specifier);
  }
  return specifiers;
}

/** Every relative module specifier (see specifiersOf). */
export function importsOf(source: string): string[] {
  return specifiersOf(source).filter((specifier) => specifier.startsWith('.'));
}

export function violations(files: readonly { path: string; source: string }[]): string[] {
  const found: string[] = [];
  for (const { path, source } of files) {
    const from = layerOf(path);
    for (const specifier of importsOf(source)) {
      const target = resolve(dirname(path), specifier);
      const to = layerOf(target);
      const forbidden = from === 'leaf' ? LEAF_FORBIDDEN : (FORBIDDEN[from] ?? []);
      if (forbidden.includes(to)) found.push(`${relative(SRC, path)} (${from}/) imports ${specifier} (${to}/)`);
      else if (to === COMPOSITION && from !== '' && from !== COMPOSITION) {
        found.push(`${relative(SRC, path)} imports ${specifier}: only main.ts and server.ts use the composition's builders`);
      }
      const inCore = againstCoreOrder(path, target);
      if (inCore !== undefined) found.push(`${relative(SRC, path)} imports ${specifier}: ${inCore}`);
      const inRuntime = againstRuntimeSeams(path, target);
      if (inRuntime !== undefined && !forbidden.includes(to)) found.push(`${relative(SRC, path)} imports ${specifier}: ${inRuntime}`);
    }
  }
  return found;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

test('the rule catches imports against the flow, type-only and dynamic ones included', () => {
  const bad = [
    { path: join(SRC, 'http', 'routes', 'x.ts'), source: "import type { PodmanRuntime } from '../../runtime/podman/podman-runtime.js';" },
    { path: join(SRC, 'store', 'jobs', 'y.ts'), source: "export { RunRequest } from '../../core/run-request.js';" },
    { path: join(SRC, 'engine', 'z.ts'), source: "const plan = await import('../core/run-plan.js');" },
    { path: join(SRC, 'config.ts'), source: "import { parseMemory } from './core/units.js';" },
    { path: join(SRC, 'core', 'ok.ts'), source: "import { x } from '../runtime/container-runtime.js';\nimport { y } from '../engine/command.js';" },
    { path: join(SRC, 'server.ts'), source: "import { PodmanRuntime } from './runtime/podman/podman-runtime.js';" },
    { path: join(SRC, 'core', 'runs', 'w.ts'), source: "import type { GatewayHandle } from '../../gateway/gateway-server.js';" },
    { path: join(SRC, 'gateway', 'v.ts'), source: "import { errorHandler } from '../http/error-handler.js';" },
    { path: join(SRC, 'gateway', 'ok.ts'), source: "import type { GrantLookup } from '../core/gateway/gateway-types.js';\nimport { estimateCostUsd } from '../engine/pricing.js';" },
    { path: join(SRC, 'server.ts'), source: "import { startGateway } from './gateway/gateway-server.js';" },
  ];
  assert.equal(violations(bad).length, 6, violations(bad).join('\n'));
});

test("the composition's builders import anything, and only main.ts and server.ts import them", () => {
  const files = [
    { path: join(SRC, 'server.ts'), source: "import { buildRuntime } from './composition/runtime.js';" },
    {
      path: join(SRC, 'composition', 'gateway.ts'),
      source: "import { startGateway } from '../gateway/gateway-server.js';\nimport { buildApp } from '../http/app.js';\nimport type { Teardown } from './teardown.js';",
    },
    { path: join(SRC, 'core', 'runs', 'a.ts'), source: "import { buildPools } from '../../composition/pools.js';" },
    { path: join(SRC, 'http', 'routes', 'b.ts'), source: "import type { Teardown } from '../../composition/teardown.js';" },
    { path: join(SRC, 'config.ts'), source: "import { buildAuth } from './composition/auth.js';" },
  ];
  assert.deepEqual(violations(files), [
    "core/runs/a.ts imports ../../composition/pools.js: only main.ts and server.ts use the composition's builders",
    "http/routes/b.ts imports ../../composition/teardown.js: only main.ts and server.ts use the composition's builders",
    'config.ts (leaf/) imports ./composition/auth.js (composition/)',
  ]);
});

test("inside core, a folder imports only what stands below it in core's order", () => {
  const files = [
    // Against the order: the pool under the runs that claim from it, containers under the pool, a core file under compose.
    { path: join(SRC, 'core', 'pool', 'a.ts'), source: "import type { RunService } from '../runs/run-service.js';" },
    { path: join(SRC, 'core', 'containers', 'b.ts'), source: "import { EnginePool } from '../pool/engine-pool.js';" },
    { path: join(SRC, 'core', 'run-plan.ts'), source: "import type { Stacks } from './compose/stacks.js';" },
    // A folder that is not in the order, from either side.
    { path: join(SRC, 'core', 'misc', 'c.ts'), source: "import { x } from '../run-plan.js';" },
    { path: join(SRC, 'core', 'runs', 'd.ts'), source: "import { y } from '../misc/y.js';" },
    // Along the order, and inside one folder.
    { path: join(SRC, 'core', 'runs', 'ok.ts'), source: "import { EnginePool } from '../pool/engine-pool.js';\nimport type { RunPlan } from '../run-plan.js';\nimport { z } from './z.js';" },
    { path: join(SRC, 'core', 'compose', 'ok.ts'), source: "import type { ContainerSlots } from '../containers/container-slots.js';\nimport type { RunPhases } from '../run-phases.js';" },
  ];
  const found = violations(files);
  assert.deepEqual(found, [
    "core/pool/a.ts imports ../runs/run-service.js: runs stands above pool in core's order",
    "core/containers/b.ts imports ../pool/engine-pool.js: pool stands above containers in core's order",
    "core/run-plan.ts imports ./compose/stacks.js: compose stands above run-plan.ts in core's order",
    "core/misc/c.ts imports ../run-plan.js: misc is not in core's order",
    "core/runs/d.ts imports ../misc/y.js: misc is not in core's order",
  ]);
});

test('the runtime\'s ports know no Podman, and only runtime/podman/ and the composition root import Podman\'s side', () => {
  const files = [
    { path: join(SRC, 'runtime', 'ports', 'a.ts'), source: "import type { PodmanClient } from '../podman/client.js';" },
    { path: join(SRC, 'runtime', 'ports', 'b.ts'), source: "import { LoopDisks } from '../run-disk.js';" },
    { path: join(SRC, 'core', 'runs', 'c.ts'), source: "import { PodmanRuntime } from '../../runtime/podman/podman-runtime.js';" },
    { path: join(SRC, 'runtime', 'd.ts'), source: "import { demultiplex } from './podman/multiplexed-stream.js';" },
    // Along the seams: ports among themselves and the policy, Podman's side over the ports, the root building it, core over ports.
    { path: join(SRC, 'runtime', 'ports', 'ok.ts'), source: "import type { ContainerKind } from '../container-policy.js';\nimport { RuntimeError } from './runtime-error.js';" },
    { path: join(SRC, 'runtime', 'podman', 'ok.ts'), source: "import type { Images } from '../ports/images.js';\nimport { PodmanClient } from './client.js';" },
    { path: join(SRC, 'server.ts'), source: "import { PodmanRuntime } from './runtime/podman/podman-runtime.js';" },
    { path: join(SRC, 'composition', 'ok.ts'), source: "import { PodmanClient } from '../runtime/podman/client.js';" },
    { path: join(SRC, 'core', 'runs', 'ok.ts'), source: "import type { Containers } from '../../runtime/ports/containers.js';" },
  ];
  assert.deepEqual(violations(files), [
    'runtime/ports/a.ts imports ../podman/client.js: a port imports only ports and the container policy',
    'runtime/ports/b.ts imports ../run-disk.js: a port imports only ports and the container policy',
    'core/runs/c.ts imports ../../runtime/podman/podman-runtime.js: only runtime/podman/ and the composition root know Podman',
    'runtime/d.ts imports ./podman/multiplexed-stream.js: only runtime/podman/ and the composition root know Podman',
  ]);
});

test("every folder and file directly in core has its place in core's order", () => {
  const units = new Set(sourceFiles(join(SRC, 'core')).map((file) => coreUnitOf(file)!));
  assert.deepEqual([...units].filter((unit) => !CORE_ORDER.includes(unit)).sort(), []);
  assert.deepEqual(CORE_ORDER.filter((unit) => !units.has(unit)), [], 'the order names only what exists');
});

test('no module under src/ imports against the one-way flow', () => {
  const files = sourceFiles(SRC).map((path) => ({ path, source: readFileSync(path, 'utf8') }));
  assert.ok(files.length > 50, 'the source tree was read');
  assert.deepEqual(violations(files), []);
});

test("the repository's packages are imported only where declared: the server never imports its command line", () => {
  // Each of src/ (the server, root package.json) and packages/*/src imports a @berth/* package only when its
  // manifest's dependencies name it: an undeclared one works only through the checkout's workspace links and
  // breaks where the package is installed alone (the image, a registry install).
  const ROOT = resolve(SRC, '..');
  const manifestOf = (dir: string) => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; dependencies?: Record<string, string> };
  const trees = [ROOT, ...readdirSync(join(ROOT, 'packages')).map((name) => join(ROOT, 'packages', name))];
  const found: string[] = [];
  for (const dir of trees) {
    const manifest = manifestOf(dir);
    const declared = new Set(Object.keys(manifest.dependencies ?? {}));
    for (const path of sourceFiles(join(dir, 'src'))) {
      for (const specifier of specifiersOf(readFileSync(path, 'utf8'))) {
        const name = /^@berth\/[^/]+/.exec(specifier)?.[0];
        if (name !== undefined && name !== manifest.name && !declared.has(name)) found.push(`${relative(ROOT, path)} imports ${specifier}, not a dependency of ${relative(ROOT, dir) || '.'}/package.json`);
      }
    }
  }
  assert.deepEqual(found, []);
  assert.equal(manifestOf(ROOT).dependencies?.['@berth/cli'], undefined, 'the server does not depend on @berth/cli');
});
