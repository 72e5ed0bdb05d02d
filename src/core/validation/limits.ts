// Resource limits: memory, disk, cpus, cpu_shares, timeout and hooks_timeout, parsed strictly (src/units.ts),
// bounded by configuration and defaulted from it.
import type { ContainerPlan } from '../run-plan.js';
import type { Config } from '../../config.js';
import { errors } from '../../errors.js';
import type { ContainerOptions } from '../run-request.js';
import { formatDuration, parseCpus, parseDuration, parseMemory } from '../../units.js';

/** Podman refuses memory limits under 6 MiB. */
export const MIN_MEMORY_BYTES = 6 * 1024 ** 2;
/** A run's file system (runtime/run-disk.ts) needs room for its own metadata and the engine's config dir. */
export const MIN_DISK_BYTES = 64 * 1024 ** 2;
/** The kernel's smallest CFS quota is 1 ms per 100 ms period. */
export const MIN_CPUS = 0.01;
export const MIN_CPU_SHARES = 2;
export const MAX_CPU_SHARES = 262_144;
export const MIN_TIMEOUT_MS = 1_000;
export const DEFAULT_HOOKS_TIMEOUT_MS = 5 * 60_000;

/** The server's defaults and upper bounds of a container's resources (SERVICE_AGENT_DEFAULT_* and SERVICE_AGENT_MAX_*). */
export type LimitsPolicy = Pick<
  Config['agent'],
  'defaultMemoryBytes' | 'maxMemoryBytes' | 'defaultDiskBytes' | 'maxDiskBytes' | 'defaultCpus' | 'maxCpus' | 'defaultCpuShares' | 'defaultTimeoutMs' | 'maxTimeoutMs'
>;

export type Limits = Pick<ContainerPlan, 'memoryBytes' | 'memoryText' | 'diskBytes' | 'diskText' | 'cpus' | 'cpuShares' | 'timeoutMs' | 'timeoutText'>;

export function formatMemory(bytes: number): string {
  for (const [unit, size] of [['t', 1024 ** 4], ['g', 1024 ** 3], ['m', 1024 ** 2], ['k', 1024]] as const) {
    if (bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return `${bytes}b`;
}

export function checkMemory(text: string | undefined, policy: LimitsPolicy): { bytes: number; text: string } {
  const { defaultMemoryBytes, maxMemoryBytes } = policy;
  if (text === undefined) return { bytes: defaultMemoryBytes, text: formatMemory(defaultMemoryBytes) };
  const bytes = parseMemory(text);
  if (bytes === undefined) {
    throw errors.invalid(`container.memory: ${JSON.stringify(text)} is not a memory size such as 512m or 2g (a positive whole number with unit b, k, m, g or t)`);
  }
  if (bytes < MIN_MEMORY_BYTES) throw errors.invalid(`container.memory: "${text}" is below the minimum of 6m`);
  if (bytes > maxMemoryBytes) {
    throw errors.invalid(`container.memory: "${text}" is above the maximum of ${formatMemory(maxMemoryBytes)} (SERVICE_AGENT_MAX_MEMORY)`);
  }
  return { bytes, text };
}

/** container.disk: the size of the file system everything the run writes goes to. */
export function checkDisk(text: string | undefined, policy: LimitsPolicy): { bytes: number; text: string } {
  const { defaultDiskBytes, maxDiskBytes } = policy;
  if (text === undefined) return { bytes: defaultDiskBytes, text: formatMemory(defaultDiskBytes) };
  const bytes = parseMemory(text);
  if (bytes === undefined) {
    throw errors.invalid(`container.disk: ${JSON.stringify(text)} is not a size such as 512m or 2g (a positive whole number with unit b, k, m, g or t)`);
  }
  if (bytes < MIN_DISK_BYTES) throw errors.invalid(`container.disk: "${text}" is below the minimum of ${formatMemory(MIN_DISK_BYTES)}`);
  if (bytes > maxDiskBytes) {
    throw errors.invalid(`container.disk: "${text}" is above the maximum of ${formatMemory(maxDiskBytes)} (SERVICE_AGENT_MAX_DISK)`);
  }
  return { bytes, text };
}

/** A string such as "0.5" or a JSON number such as 2; at most three decimals either way. */
export function checkCpus(value: string | number | undefined, policy: LimitsPolicy): number {
  const { defaultCpus, maxCpus } = policy;
  if (value === undefined) return defaultCpus;
  const text = typeof value === 'number' ? (Number.isFinite(value) ? String(value) : 'NaN') : value;
  const cpus = parseCpus(text);
  if (cpus === undefined) {
    throw errors.invalid(`container.cpus: ${JSON.stringify(value)} is not a CPU count such as 0.5 or 2 (positive, at most three decimals)`);
  }
  if (cpus < MIN_CPUS) throw errors.invalid(`container.cpus: ${text} is below the minimum of ${MIN_CPUS}`);
  if (cpus > maxCpus) throw errors.invalid(`container.cpus: ${text} is above the maximum of ${maxCpus} (SERVICE_AGENT_MAX_CPUS)`);
  return cpus;
}

export function checkCpuShares(value: number | undefined, policy: LimitsPolicy): number {
  if (value === undefined) return policy.defaultCpuShares;
  if (!Number.isSafeInteger(value) || value < MIN_CPU_SHARES || value > MAX_CPU_SHARES) {
    throw errors.invalid(`container.cpu_shares: ${value} is not a whole number from ${MIN_CPU_SHARES} to ${MAX_CPU_SHARES}`);
  }
  return value;
}

/** A duration field (timeout, hooks_timeout): at least 1s, at most SERVICE_AGENT_MAX_TIMEOUT. */
export function checkDuration(text: string | undefined, field: string, defaultMs: number, policy: LimitsPolicy): { ms: number; text: string } {
  const { maxTimeoutMs } = policy;
  if (text === undefined) return { ms: Math.min(defaultMs, maxTimeoutMs), text: formatDuration(Math.min(defaultMs, maxTimeoutMs)) };
  const ms = parseDuration(text);
  if (ms === undefined) {
    throw errors.invalid(`${field}: ${JSON.stringify(text)} is not a duration such as 30s, 5m, 1h or 1h30m (positive whole numbers with unit ms, s, m, h or d)`);
  }
  if (ms < MIN_TIMEOUT_MS) throw errors.invalid(`${field}: "${text}" is below the minimum of 1s`);
  if (ms > maxTimeoutMs) {
    throw errors.invalid(`${field}: "${text}" is above the maximum of ${formatDuration(maxTimeoutMs)} (SERVICE_AGENT_MAX_TIMEOUT)`);
  }
  return { ms, text };
}

export function validateLimits(container: ContainerOptions | undefined, policy: LimitsPolicy): Limits {
  const memory = checkMemory(container?.memory, policy);
  const disk = checkDisk(container?.disk, policy);
  const cpus = checkCpus(container?.cpus, policy);
  const cpuShares = checkCpuShares(container?.cpu_shares, policy);
  const timeout = checkDuration(container?.timeout, 'container.timeout', policy.defaultTimeoutMs, policy);
  return { memoryBytes: memory.bytes, memoryText: memory.text, diskBytes: disk.bytes, diskText: disk.text, cpus, cpuShares, timeoutMs: timeout.ms, timeoutText: timeout.text };
}

export function validateHooksTimeout(text: string | undefined, policy: LimitsPolicy): number {
  return checkDuration(text, 'container.lifecycle.hooks_timeout', DEFAULT_HOOKS_TIMEOUT_MS, policy).ms;
}
