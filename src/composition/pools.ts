// Pre-started engines for runs and for agents (SERVICE_POOL_SIZE, SERVICE_AGENT_POOL_SIZE), each made for
// the default request; removed at stop before the runs drain (core/shutdown.ts).
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { EnginePool, type PoolKind } from '../core/pool/engine-pool.js';
import { EnginePools } from '../core/pool/engine-pools.js';
import { MISS_REASONS } from '../core/pool/pool-match.js';
import type { SessionStore } from '../core/sessions/session-store.js';
import { validateRunRequest } from '../core/validation/validate-run.js';
import type { Metrics } from '../metrics/metrics.js';
import type { ContainerRuntime } from '../runtime/container-runtime.js';
import { hostCpu } from '../runtime/host-cpu.js';
import type { EngineContainers } from './engine-containers.js';

export interface PoolInputs {
  readonly config: Config;
  readonly runtime: ContainerRuntime;
  readonly sessions: SessionStore;
  readonly containers: Pick<EngineContainers, 'settings' | 'slots' | 'images'>;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

/** The two pools, not yet started (EnginePools.start, once the runs that claim from them exist). */
export async function buildPools({ config, runtime, sessions, containers, metrics, logger }: PoolInputs): Promise<EnginePools> {
  const template = await validateRunRequest({ prompt: 'pooled engine' }, { config, secretExists: async () => true });
  const enginePool = (kind: PoolKind, size: number) => {
    // The pool's series start at zero, like the other small label sets (metrics.ts): a scrape shows each
    // pool and miss reason from the start, so an absent series means a renamed metric, not "none yet".
    metrics.poolReady.set({ pool: kind }, 0);
    metrics.poolHits.inc({ pool: kind }, 0);
    for (const reason of MISS_REASONS) metrics.poolMisses.inc({ pool: kind, reason }, 0);
    return new EnginePool({
      kind,
      settings: { size, maxAgeMs: config.pool.maxAgeMs, refillPauseMs: config.pool.refillPauseMs },
      runtime,
      sessions,
      container: containers.settings,
      slots: containers.slots,
      template,
      engineBinary: () => containers.images.engineBinary(config.agent.image),
      cpu: hostCpu,
      log: logger,
      observer: {
        size: (ready) => metrics.poolReady.set({ pool: kind }, ready),
        hit: (ms) => {
          metrics.poolHits.inc({ pool: kind });
          metrics.poolClaim.observe({ pool: kind }, ms / 1000);
        },
        miss: (reason) => metrics.poolMisses.inc({ pool: kind, reason }),
        refilled: (ms) => metrics.poolRefill.observe({ pool: kind }, ms / 1000),
      },
    });
  };
  return new EnginePools(enginePool('run', config.pool.size), enginePool('agent', config.pool.agentSize));
}
