// How agent containers reach a model and with which credential. Decided once at start:
//  1. SERVICE_ENGINE_CREDENTIALS_FILE set → its content is synced into the Podman secret
//     SERVICE_ENGINE_CREDENTIALS_SECRET, and runs use SERVICE_ENGINE_BASE_URL (default Anthropic's API);
//  2. else that secret already exists in Podman's store → runs use it;
//  3. else, with SERVICE_OFFLINE_MODEL=true, the embedded offline model with a generated key;
//  4. else the engine is not configured and runs answer 503.
// The credential only ever travels as a Podman secret mounted as a file: never through the API, argv,
// or the container's environment as stored by Podman.
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../config.js';
import { errors } from '../errors.js';
import type { ContainerRuntime } from '../runtime/container-runtime.js';

export type EngineMode = 'credentials-file' | 'credentials-secret' | 'offline-model' | 'not-configured';

export interface EngineAccessState {
  readonly mode: EngineMode;
  readonly baseUrl: string;
  readonly secretName: string;
  /** The variable the engine reads the credential from. */
  readonly variable: 'ANTHROPIC_API_KEY' | 'CLAUDE_CODE_OAUTH_TOKEN';
  readonly offline: boolean;
  readonly message: string;
}

export interface OfflineModelHandle {
  readonly port: number;
  close(): Promise<void>;
}

export type StartOfflineModel = (apiKey: string) => Promise<OfflineModelHandle>;

const DEFAULT_BASE_URL = 'https://api.anthropic.com';
/** How a container names the host (Podman's /etc/hosts entry). */
export const HOST_FROM_CONTAINER = 'host.containers.internal';

export class EngineAccess {
  private state: EngineAccessState;
  private offlineModel: OfflineModelHandle | undefined;
  private ownedSecret: string | undefined;

  constructor(
    private readonly config: Config,
    private readonly runtime: ContainerRuntime,
    private readonly startOfflineModel: StartOfflineModel,
    private readonly instanceName: string,
    /**
     * Where engine containers reach the offline model: the agent network's gateway address when Berth
     * knows it, else HOST_FROM_CONTAINER (offlineModelHost()).
     */
    private readonly offlineModelHost: string = HOST_FROM_CONTAINER,
  ) {
    this.state = this.notConfigured('not initialised');
  }

  async init(): Promise<EngineAccessState> {
    const { engine } = this.config;
    const variable = engine.credentialKind === 'oauth_token' ? 'CLAUDE_CODE_OAUTH_TOKEN' : 'ANTHROPIC_API_KEY';
    if (engine.credentialsFile) {
      const value = (await readFile(engine.credentialsFile, 'utf8')).trim();
      if (value === '') throw new Error(`SERVICE_ENGINE_CREDENTIALS_FILE: ${engine.credentialsFile} is empty`);
      await this.runtime.removeSecret(engine.credentialsSecret);
      await this.runtime.createSecret(engine.credentialsSecret, value);
      this.state = {
        mode: 'credentials-file', baseUrl: engine.baseUrl ?? DEFAULT_BASE_URL, secretName: engine.credentialsSecret,
        variable, offline: false, message: `engine configured from ${engine.credentialsFile} (synced into Podman secret ${engine.credentialsSecret})`,
      };
    } else if (await this.runtime.secretExists(engine.credentialsSecret)) {
      this.state = {
        mode: 'credentials-secret', baseUrl: engine.baseUrl ?? DEFAULT_BASE_URL, secretName: engine.credentialsSecret,
        variable, offline: false, message: `engine configured with Podman secret ${engine.credentialsSecret}`,
      };
    } else if (engine.offlineModel) {
      const key = await this.offlineModelKey();
      this.offlineModel = await this.startOfflineModel(key);
      // A key secret left by a killed process of this instance is replaced (the key itself is kept: see offlineModelKey).
      const prefix = `berth-offline-model-key-${this.instanceName}-`;
      for (const name of await this.runtime.listSecrets()) {
        if (name.startsWith(prefix)) await this.runtime.removeSecret(name);
      }
      this.ownedSecret = `${prefix}${randomBytes(4).toString('hex')}`;
      await this.runtime.createSecret(this.ownedSecret, key);
      this.state = {
        mode: 'offline-model', baseUrl: `http://${this.offlineModelHost}:${this.offlineModel.port}`, secretName: this.ownedSecret,
        variable: 'ANTHROPIC_API_KEY', offline: true,
        message: 'engine uses the embedded offline model (deterministic, no API key); set SERVICE_ENGINE_CREDENTIALS_FILE or create the Podman secret SERVICE_ENGINE_CREDENTIALS_SECRET for a real model',
      };
    } else {
      this.state = this.notConfigured(
        `no credentials: set SERVICE_ENGINE_CREDENTIALS_FILE, or create the Podman secret "${engine.credentialsSecret}", or enable SERVICE_OFFLINE_MODEL`,
      );
    }
    return this.state;
  }

  current(): EngineAccessState {
    if (this.state.mode === 'not-configured') throw errors.engineNotConfigured(this.state.message);
    return this.state;
  }

  status(): EngineAccessState {
    return this.state;
  }

  async close(): Promise<void> {
    if (this.ownedSecret) await this.runtime.removeSecret(this.ownedSecret).catch(() => undefined);
    await this.offlineModel?.close();
  }

  /**
   * The offline model's key, generated once per data directory and kept there (0600): engines that a killed
   * or detached process left running hold this key, and must still be answered by the next process's model.
   */
  private async offlineModelKey(): Promise<string> {
    const file = join(this.config.dataDir, 'offline-model.key');
    const kept = await readFile(file, 'utf8').then((text) => text.trim(), () => '');
    if (/^offline-[0-9a-f]{48}$/.test(kept)) return kept;
    const key = `offline-${randomBytes(24).toString('hex')}`;
    await writeFile(file, key, { mode: 0o600 });
    return key;
  }

  private notConfigured(message: string): EngineAccessState {
    return { mode: 'not-configured', baseUrl: '', secretName: '', variable: 'ANTHROPIC_API_KEY', offline: false, message };
  }
}

/**
 * The host engine containers reach the offline model at. Rootful, that is the agent network's gateway
 * address itself: a name would cost a lookup in every container, and the engine's resolver was seen to
 * fail host.containers.internal now and then under load (ENOTFOUND, seen at concurrency 8),
 * failing the run. Rootless Podman's bridge lives in its own namespace, so its gateway is not the host:
 * there (and on a network without a gateway) the name Podman writes into /etc/hosts is used.
 */
export function offlineModelHost(rootful: boolean, agentNetworkGateway: string | undefined): string {
  return rootful && agentNetworkGateway !== undefined ? agentNetworkGateway : HOST_FROM_CONTAINER;
}
