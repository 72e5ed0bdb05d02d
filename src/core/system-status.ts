// Health and engine status: what GET /health and GET /claude/status report.
import { isUsableSecret, secretsPolicy } from './validation/secrets-env.js';
import { access, constants } from 'node:fs/promises';
import type { Config } from '../config.js';
import type { Reachable } from '../runtime/container-runtime.js';
import type { Secrets } from '../runtime/ports/secrets.js';
import type { EngineAccess, EngineAccessState } from './engine-access.js';

export type ComponentStatus = 'ok' | 'unavailable' | 'not_configured';

export interface Health {
  readonly status: 'ok' | 'degraded';
  readonly name: string;
  readonly version: string;
  /** SERVICE_NODE_NAME: which node answered (behind a load balancer, one of several). */
  readonly node?: string;
  readonly components: readonly { readonly name: string; readonly status: ComponentStatus }[];
}

/** What the status reads of the configuration: the version it reports, and where the engine's credential is. */
export type StatusSettings = Pick<Config, 'version'> & { readonly engine: Pick<Config['engine'], 'credentialsFile' | 'credentialsSecret'> };

/** This node: its name, and with a shared database its lease (core/cluster/node-registry.ts). */
export interface NodeHealth {
  readonly name: string;
  /** undefined: no shared database (one node, no lease). */
  readonly lease: { readonly registered: boolean } | undefined;
}

export class SystemStatus {
  constructor(
    private readonly config: StatusSettings,
    private readonly runtime: Reachable & Pick<Secrets, 'listSecrets' | 'secretExists'>,
    private readonly engineAccess: EngineAccess,
    private readonly node?: NodeHealth,
  ) {}

  async health(): Promise<Health> {
    const state = this.engineAccess.status();
    const [runtime, file, secret] = await Promise.all([
      this.runtime.ping().then((): ComponentStatus => 'ok', (): ComponentStatus => 'unavailable'),
      this.credentialsFile(),
      this.credentialsSecret(state),
    ]);
    const components = [
      { name: 'container-runtime', status: runtime },
      { name: 'engine-credentials-file', status: file },
      { name: 'engine-credentials-secret', status: secret },
      // With a shared database: a node that lost its lease is degraded, so a load balancer's check takes it out.
      ...(this.node?.lease ? [{ name: 'node-lease', status: this.node.lease.registered ? ('ok' as const) : ('unavailable' as const) }] : []),
    ];
    // Degraded without a model to forward to: no credential, or the configured secret gone since the start.
    const degraded = runtime !== 'ok' || state.mode === 'not-configured' || secret === 'unavailable' || file === 'unavailable' || this.node?.lease?.registered === false;
    return { status: degraded ? 'degraded' : 'ok', name: 'berth', version: this.config.version, ...(this.node ? { node: this.node.name } : {}), components };
  }

  engineStatus(): { configured: boolean; message: string } {
    const state = this.engineAccess.status();
    return { configured: state.mode !== 'not-configured', message: state.message };
  }

  /** The secrets a caller may name in secrets_env, by the rule validation applies: Berth's own are left out. */
  async secretNames(): Promise<string[]> {
    const policy = secretsPolicy(this.config.engine);
    return (await this.runtime.listSecrets()).filter((name) => isUsableSecret(name, policy));
  }

  /**
   * The credential the model gateway holds: the Podman secret's (read at start, still there?), or the offline
   * model's generated key (ok); not_configured with a credentials file (never synced into a secret) or none.
   */
  private async credentialsSecret(state: EngineAccessState): Promise<ComponentStatus> {
    if (state.mode === 'offline-model') return 'ok';
    if (state.mode !== 'credentials-secret') return 'not_configured';
    return this.runtime.secretExists(this.config.engine.credentialsSecret).then((exists): ComponentStatus => (exists ? 'ok' : 'unavailable'), (): ComponentStatus => 'unavailable');
  }

  private async credentialsFile(): Promise<ComponentStatus> {
    const file = this.config.engine.credentialsFile;
    if (!file) return 'not_configured';
    return access(file, constants.R_OK).then((): ComponentStatus => 'ok', (): ComponentStatus => 'unavailable');
  }
}
