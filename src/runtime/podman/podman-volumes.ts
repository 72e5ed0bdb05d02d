// Volumes over Podman's libpod REST API, their data optionally on a directory of Berth's (./volume-backing.ts).
import type { LabelledObject } from '../ports/labels.js';
import type { Volumes } from '../ports/volumes.js';
import type { PodmanClient } from './client.js';
import { bindVolumeData, unbindVolumeData } from './volume-backing.js';

export class PodmanVolumes implements Volumes {
  readonly #client: PodmanClient;

  constructor(client: PodmanClient) {
    this.#client = client;
  }

  async createVolume(name: string, labels: Readonly<Record<string, string>>, backingDir?: string): Promise<void> {
    const created = await this.#client.json<{ Mountpoint: string }>('/volumes/create', { method: 'POST', json: { Name: name, Label: labels } });
    if (backingDir === undefined) return;
    // Bound before any container can use it (./volume-backing.ts); a volume that cannot be bound is not kept.
    await bindVolumeData(backingDir, created.Mountpoint).catch(async (error: unknown) => {
      await this.removeVolume(name).catch(() => undefined);
      throw error;
    });
  }

  async removeVolume(name: string): Promise<void> {
    const volume = await this.#client.jsonIfFound<{ Mountpoint: string }>(`/volumes/${encodeURIComponent(name)}/json`);
    if (volume === undefined) return;
    await unbindVolumeData(volume.Mountpoint);
    await this.#client.call(`/volumes/${encodeURIComponent(name)}`, { method: 'DELETE', query: { force: true }, accept: [404] });
  }

  async listVolumes(label: string): Promise<LabelledObject[]> {
    const found = await this.#client.json<{ Name: string; Labels?: Record<string, string> | null }[]>('/volumes/json', {
      query: { filters: JSON.stringify({ label: [label] }) },
    });
    return found.map((volume) => ({ name: volume.Name, labels: volume.Labels ?? {} }));
  }
}
