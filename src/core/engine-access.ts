// Which model the gateway forwards engines' requests to, and with which credential. Decided once at start:
//  1. SERVICE_ENGINE_CREDENTIALS_FILE set → its content, forwarded to SERVICE_ENGINE_BASE_URL (default
//     Anthropic's API);
//  2. else the Podman secret SERVICE_ENGINE_CREDENTIALS_SECRET, when it exists: its value, read once;
//  3. else, with SERVICE_OFFLINE_MODEL=true, the embedded offline model on 127.0.0.1, with a generated key;
//  4. else the engine is not configured and runs answer 503.
// The credential stays in the Berth process: no container gets it, in any form (file, secret, variable).
// Engines reach the model through the gateway (src/gateway/) with a per-run credential of their own
// (core/gateway/run-grants.ts); the gateway puts this one in their place.
import { randomBytes } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../config.js';
import { errors } from '../errors.js';
import type { Secrets } from '../runtime/ports/secrets.js';
import type { UpstreamModel } from './gateway/gateway-types.js';

export type EngineMode = 'credentials-file' | 'credentials-secret' | 'offline-model' | 'not-configured';

/** A configured model: where the gateway forwards, and whether it is the offline model. */
export interface ConfiguredEngineAccess {
  readonly mode: Exclude<EngineMode, 'not-configured'>;
  readonly upstream: UpstreamModel;
  readonly offline: boolean;
  readonly message: string;
}

export type EngineAccessState = ConfiguredEngineAccess | { readonly mode: 'not-configured'; readonly offline: false; readonly message: string };

export interface OfflineModelHandle {
  readonly port: number;
  close(): Promise<void>;
}

export type StartOfflineModel = (options: { readonly host: string; readonly apiKey: string }) => Promise<OfflineModelHandle>;

const DEFAULT_BASE_URL = 'https://api.anthropic.com';
/** How a container names the host (Podman's /etc/hosts entry): the gateway's address when Podman is rootless. */
export const HOST_FROM_CONTAINER = 'host.containers.internal';
/** The offline model listens on loopback only: the gateway, in the same process's host, is its one client. */
export const OFFLINE_MODEL_HOST = '127.0.0.1';

/** What EngineAccess reads of the configuration: the engine's settings, and the data directory it tidies. */
export type EngineAccessSettings = Pick<Config, 'engine' | 'dataDir'>;

export class EngineAccess {
  private state: EngineAccessState = { mode: 'not-configured', offline: false, message: 'not initialised' };
  private offlineModel: OfflineModelHandle | undefined;

  constructor(
    private readonly config: EngineAccessSettings,
    private readonly runtime: Pick<Secrets, 'secretExists' | 'readSecret'>,
    private readonly startOfflineModel: StartOfflineModel,
  ) {}

  async init(): Promise<EngineAccessState> {
    const { engine } = this.config;
    const kind = engine.credentialKind;
    const baseUrl = engine.baseUrl ?? DEFAULT_BASE_URL;
    // A key file earlier versions kept for the offline model (engines then held it): no longer used.
    await rm(join(this.config.dataDir, 'offline-model.key'), { force: true });
    if (engine.credentialsFile) {
      const value = (await readFile(engine.credentialsFile, 'utf8')).trim();
      if (value === '') throw new Error(`SERVICE_ENGINE_CREDENTIALS_FILE: ${engine.credentialsFile} is empty`);
      this.state = {
        mode: 'credentials-file', upstream: { baseUrl, credential: { kind, value } }, offline: false,
        message: `engine configured from ${engine.credentialsFile}; the model gateway forwards to ${baseUrl}`,
      };
    } else if (await this.runtime.secretExists(engine.credentialsSecret)) {
      const value = (await this.runtime.readSecret(engine.credentialsSecret)).trim();
      if (value === '') throw new Error(`SERVICE_ENGINE_CREDENTIALS_SECRET: the Podman secret ${engine.credentialsSecret} is empty`);
      this.state = {
        mode: 'credentials-secret', upstream: { baseUrl, credential: { kind, value } }, offline: false,
        message: `engine configured with Podman secret ${engine.credentialsSecret}; the model gateway forwards to ${baseUrl}`,
      };
    } else if (engine.offlineModel) {
      // A new key per process: only the gateway of this process ever presents it.
      const key = `offline-${randomBytes(24).toString('hex')}`;
      this.offlineModel = await this.startOfflineModel({ host: OFFLINE_MODEL_HOST, apiKey: key });
      this.state = {
        mode: 'offline-model',
        upstream: { baseUrl: `http://${OFFLINE_MODEL_HOST}:${this.offlineModel.port}`, credential: { kind: 'api_key', value: key } },
        offline: true,
        message: 'engine uses the embedded offline model (deterministic, no API key); set SERVICE_ENGINE_CREDENTIALS_FILE or create the Podman secret SERVICE_ENGINE_CREDENTIALS_SECRET for a real model',
      };
    } else {
      this.state = {
        mode: 'not-configured', offline: false,
        message: `no credentials: set SERVICE_ENGINE_CREDENTIALS_FILE, or create the Podman secret "${engine.credentialsSecret}", or enable SERVICE_OFFLINE_MODEL`,
      };
    }
    return this.state;
  }

  /** The configured model; a 503 (engine not configured) otherwise. */
  current(): ConfiguredEngineAccess {
    if (this.state.mode === 'not-configured') throw errors.engineNotConfigured(this.state.message);
    return this.state;
  }

  status(): EngineAccessState {
    return this.state;
  }

  async close(): Promise<void> {
    await this.offlineModel?.close();
  }
}
