// Data flows one way: http → core → runtime / engine / store. This test reads every import (type-only
// ones too) under src/ and fails, naming file and import, when one runs against the flow.
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

/** The composition root may import anything; the other files directly in src/ (config, errors, units…) are leaves. */
const COMPOSITION_ROOT = new Set(['main.ts', 'server.ts']);
const LEAF_FORBIDDEN = ['core', 'http', 'runtime', 'store', 'engine', 'gateway'];

/** The folder of src/ a file belongs to: '' for the composition root, 'leaf' for other files directly in src/. */
function layerOf(file: string): string {
  const parts = relative(SRC, file).split('/');
  if (parts.length > 1) return parts[0]!;
  return COMPOSITION_ROOT.has(parts[0]!) ? '' : 'leaf';
}

/** Every relative module specifier of `import … from`, `export … from`, `import type` and dynamic `import()`. */
export function importsOf(source: string): string[] {
  const specifiers: string[] = [];
  const pattern = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s*['"]([^'"]+)['"]/gm;
  for (const match of source.matchAll(pattern)) {
    const specifier = match[1] ?? match[2] ?? match[3];
    if (specifier?.startsWith('.')) specifiers.push(specifier);
  }
  return specifiers;
}

export function violations(files: readonly { path: string; source: string }[]): string[] {
  const found: string[] = [];
  for (const { path, source } of files) {
    const from = layerOf(path);
    for (const specifier of importsOf(source)) {
      const to = layerOf(resolve(dirname(path), specifier));
      const forbidden = from === 'leaf' ? LEAF_FORBIDDEN : (FORBIDDEN[from] ?? []);
      if (forbidden.includes(to)) found.push(`${relative(SRC, path)} (${from}/) imports ${specifier} (${to}/)`);
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

test('no module under src/ imports against the one-way flow', () => {
  const files = sourceFiles(SRC).map((path) => ({ path, source: readFileSync(path, 'utf8') }));
  assert.ok(files.length > 50, 'the source tree was read');
  assert.deepEqual(violations(files), []);
});
