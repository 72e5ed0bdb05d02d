// The secrets concern of the runtime: Podman secrets by exact name (the model credential, a caller's secrets
// mounted as files, a workspace clone's credentials).

export interface Secrets {
  secretExists(name: string): Promise<boolean>;
  /** The id of the secret of exactly this name (a secret removed and created again has a new one). */
  secretId(name: string): Promise<string | undefined>;
  listSecrets(): Promise<string[]>;
  createSecret(name: string, value: string): Promise<void>;
  /** The value of a secret (the model credential Berth forwards; Podman 4.3 has no API to show it). */
  readSecret(name: string): Promise<string>;
  removeSecret(name: string): Promise<void>;
}
