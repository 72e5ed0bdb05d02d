// Secrets over Podman's libpod REST API, by exact name; a secret's value read through a container that is
// initialised and never started (Podman 4.3 has no API that shows it).
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Secrets } from '../ports/secrets.js';
import { PROBE_LABEL } from '../ports/labels.js';
import { RuntimeError } from '../ports/runtime-error.js';
import type { PodmanClient } from './client.js';
import { removeContainer } from './container-removal.js';

interface LibpodSecret {
  Spec: { Name: string };
}

export class PodmanSecrets implements Secrets {
  readonly #client: PodmanClient;
  /** A local image with /bin/sh whose containers readSecret creates (never starts) to read a secret. */
  readonly #readerImage: string | undefined;

  constructor(client: PodmanClient, readerImage: string | undefined) {
    this.#client = client;
    this.#readerImage = readerImage;
  }

  async secretId(name: string): Promise<string | undefined> {
    // Podman resolves a secret by name, by full id or by a unique id prefix; only an exact name counts here,
    // or `secrets_env: {"X": "3"}` would reach whichever secret's id starts with 3 (Berth's own included).
    // (At creation Podman looks names up before ids, so the exact name found here is the one mounted.)
    const secret = await this.#client.jsonIfFound<LibpodSecret & { ID?: string }>(`/secrets/${encodeURIComponent(name)}/json`);
    return secret?.Spec.Name === name ? (secret.ID ?? '') : undefined;
  }

  async secretExists(name: string): Promise<boolean> {
    return (await this.secretId(name)) !== undefined;
  }

  async listSecrets(): Promise<string[]> {
    const secrets = await this.#client.json<LibpodSecret[]>('/secrets/json');
    return secrets.map((s) => s.Spec.Name).sort();
  }

  async createSecret(name: string, value: string): Promise<void> {
    await this.#client.call('/secrets/create', {
      method: 'POST',
      query: { name },
      body: Buffer.from(value, 'utf8'),
      contentType: 'application/octet-stream',
    });
  }

  async readSecret(name: string): Promise<string> {
    // Podman 4.3 has no API that shows a secret's value (`--showsecret` came in 4.5). A container that
    // mounts it as a file is created and initialised, never started: Podman writes the secret's files into
    // the container's static directory at init, read here on the host; the container goes at once. Only
    // an image that has /bin/sh passes init (runc checks the command exists); nothing in it ever runs.
    if (!this.#readerImage) throw new RuntimeError(`secret ${name} cannot be read: no image is configured to read it with`, false);
    if ((await this.secretId(name)) === undefined) throw new RuntimeError(`Podman secret ${name} does not exist`, false);
    const created = await this.#client.json<{ Id: string }>('/containers/create', {
      method: 'POST',
      json: {
        name: `berth-secret-read-${randomBytes(6).toString('hex')}`,
        image: this.#readerImage,
        command: ['/bin/sh'],
        labels: { [PROBE_LABEL]: '1' },
        oci_runtime: 'runc',
        netns: { nsmode: 'none' },
        secrets: [{ Source: name, Target: name, Mode: 0o400 }],
      },
    });
    try {
      await this.#client.call(`/containers/${created.Id}/init`, { method: 'POST', accept: [304] });
      const inspect = await this.#client.json<{ StaticDir?: string }>(`/containers/${created.Id}/json`);
      if (!inspect.StaticDir) throw new RuntimeError(`Podman did not say where container ${created.Id} keeps its files`, false);
      return await readFile(join(inspect.StaticDir, 'secrets', name), 'utf8');
    } finally {
      await removeContainer(this.#client, created.Id);
    }
  }

  async removeSecret(name: string): Promise<void> {
    await this.#client.call(`/secrets/${encodeURIComponent(name)}`, { method: 'DELETE', accept: [404] });
  }
}
