// Which runs a pre-started engine can serve. A pooled engine was created exactly as a run of the pool's
// plan (the default request) would be, so a run may claim one only when its own plan would have created
// the same container with the same engine command line; everything else takes the normal path.
//
// What may differ: the prompt (it arrives on stdin), the timeout (Berth enforces it, not the container),
// the output format (Berth always reads the engine's stream-json; the format only shapes the answer) and
// the webhook. Options are not applied through the engine's stream-json control requests (model,
// permission mode) after start: the engine reports its start-up model and mode in the session's `init`
// event, so a switched engine would not give exactly what a fresh start with the option gives; such runs miss.
import type { EnginePlan, RunPlan } from '../run-plan.js';

export const MISS_REASONS = [
  'session', 'image', 'workdir', 'volumes', 'secrets', 'limits', 'lifecycle', 'environment', 'engine_options', 'workspace', 'empty', 'stale',
] as const;
export type MissReason = (typeof MISS_REASONS)[number];

/**
 * Engine plan keys that do not change the engine's command line or environment: the output format, and the
 * budget (the model gateway enforces it through the credential bound at the claim).
 */
const FREE_ENGINE_KEYS = new Set<keyof EnginePlan>(['output_format', 'max_budget_usd']);

/** Why a run cannot use a pooled engine made for `template`, or undefined when it can. */
export function poolMissReason(plan: RunPlan, template: RunPlan): MissReason | undefined {
  if (plan.session.kind !== 'new') return 'session';
  const container = plan.container;
  const model = template.container;
  if (container.image !== model.image) return 'image';
  if (plan.workdir !== template.workdir) return 'workdir';
  if (container.volumes.length > 0) return 'volumes';
  if (container.secretsEnv.length > 0) return 'secrets';
  if (container.memoryBytes !== model.memoryBytes || container.cpus !== model.cpus || container.cpuShares !== model.cpuShares) return 'limits';
  // A pooled engine's file system was made at the pool's size: a run asking another size misses.
  if (container.diskBytes !== model.diskBytes) return 'limits';
  if (container.lifecycle !== undefined) return 'lifecycle';
  if (container.environment !== undefined) return 'environment';
  if (!sameEngineCommand(plan.engine, template.engine)) return 'engine_options';
  return undefined;
}

function sameEngineCommand(engine: EnginePlan, template: EnginePlan): boolean {
  const keys = new Set([...Object.keys(engine), ...Object.keys(template)] as (keyof EnginePlan)[]);
  for (const key of keys) {
    if (FREE_ENGINE_KEYS.has(key)) continue;
    if (JSON.stringify(engine[key]) !== JSON.stringify(template[key])) return false;
  }
  return true;
}
