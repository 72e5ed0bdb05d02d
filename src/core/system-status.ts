// Health and engine status: what GET /health and GET /claude/status report.
import { isUsableSecret, secretsPolicy } from './validation/secrets-env.js';
import { access, constants } from 'node:fs/promises';
import type { Config } from '../config.js';
import type { ContainerRuntime } from '../runtime/container-runtime.js';
import type { EngineAccess } from './engine-access.js';

export type ComponentStatus = 'ok' | 'unavailable' | 'not_configured';

export interface Health {
  readonly status: 'ok' | 'degraded';
  readonly name: string;
  readonly version: string;
  readonly components: readonly { readonly name: string; readonly status: ComponentStatus }[];
}

export class SystemStatus {
  constructor(
    private readonly config: Config,
    private readonly runtime: ContainerRuntime,
    private readonly engineAccess: EngineAccess,
  ) {}

  async health(): Promise<Health> {
    const state = this.engineAccess.status();
    const [runtime, file, secret] = await Promise.all([
      this.runtime.ping().then((): ComponentStatus => 'ok', (): ComponentStatus => 'unavailable'),
      this.credentialsFile(),
      state.secretName === ''
        ? Promise.resolve<ComponentStatus>('not_configured')
        : this.runtime.secretExists(state.secretName).then((exists): ComponentStatus => (exists ? 'ok' : 'unavailable'), (): ComponentStatus => 'unavailable'),
    ]);
    const components = [
      { name: 'container-runtime', status: runtime },
      { name: 'engine-credentials-file', status: file },
      { name: 'engine-credentials-secret', status: secret },
    ];
    const degraded = runtime !== 'ok' || secret !== 'ok' || file === 'unavailable';
    return { status: degraded ? 'degraded' : 'ok', name: 'berth', version: this.config.version, components };
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

  private async credentialsFile(): Promise<ComponentStatus> {
    const file = this.config.engine.credentialsFile;
    if (!file) return 'not_configured';
    return access(file, constants.R_OK).then((): ComponentStatus => 'ok', (): ComponentStatus => 'unavailable');
  }
}
