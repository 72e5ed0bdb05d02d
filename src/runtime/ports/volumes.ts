// The volumes concern of the runtime: a compose stack's named volumes, their data on the stack's disk.

import type { LabelledObject } from './labels.js';

export interface Volumes {
  /**
   * `backingDir` (a directory as Berth sees it, e.g. on a stack's disk): holds the volume's data instead of
   * Podman's storage; it is bind-mounted onto the volume's own directory, so Podman still copies the image's
   * content up into it and gives it to the container's user. Unbound again by removeVolume.
   */
  createVolume(name: string, labels: Readonly<Record<string, string>>, backingDir?: string): Promise<void>;
  /** Removes the volume (unbinding its backing directory first); also when a container still uses it. */
  removeVolume(name: string): Promise<void>;
  listVolumes(label: string): Promise<LabelledObject[]>;
}
