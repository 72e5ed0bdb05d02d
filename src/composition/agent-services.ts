// Persistent agents (docs/agents.md): one engine container each, taking turns over its life; stopped (and
// removed) at stop before the API listener closes. Agents a previous process left are followed again by
// AgentService.restore, which startBerth calls once the service exists (so a stop always finds it).
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { AgentService } from '../core/agents/agent-service.js';
import type { Budgets } from '../core/gateway/budgets.js';
import type { RunService } from '../core/runs/run-service.js';
import type { SessionStore } from '../core/sessions/session-store.js';
import type { Metrics } from '../metrics/metrics.js';
import type { ContainerRuntime } from '../runtime/container-runtime.js';
import type { EngineContainers } from './engine-containers.js';
import type { Stores } from './stores.js';

export interface AgentServiceInputs {
  readonly config: Config;
  readonly runtime: ContainerRuntime;
  readonly stores: Pick<Stores, 'agents' | 'events'>;
  readonly sessions: SessionStore;
  readonly runs: RunService;
  readonly containers: Pick<EngineContainers, 'settings' | 'slots'>;
  readonly budgets: Budgets;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

export function buildAgentServices({ config, runtime, stores, sessions, runs, containers, budgets, metrics, logger }: AgentServiceInputs): AgentService {
  return new AgentService({
    runs,
    budgets,
    // An agent followed again after a restart holds its workspace again (RunService.reclaimSession).
    sessions: { hide: (id) => sessions.hide(id), reclaim: (run) => runs.reclaimSession(run, 'agent') },
    store: stores.agents,
    events: stores.events,
    slots: containers.slots,
    container: { ...containers.settings, runtime, log: logger },
    defaultIdleTimeoutSeconds: config.agents.defaultIdleTimeoutSeconds,
    idleTickMs: config.agents.idleTickMs,
    exitedRetentionMs: config.agents.exitedRetentionMs,
    sendTimeoutMs: config.agents.sendTimeoutMs,
    maxPromptBytes: config.maxPromptBytes,
    maxSubscribers: config.agents.maxSubscribers,
    log: logger,
    observer: { statusCounts: (counts) => Object.entries(counts).forEach(([status, n]) => metrics.agents.set({ status }, n)) },
  });
}
