// What Berth needs from a container runtime, in Berth's own terms: one interface per concern in ports/
// (containers, images, networks, volumes, secrets, builds), each with the types it speaks in, and
// ContainerRuntime, all of them at once. A consumer takes the narrowest slice it uses (e.g. `Secrets &
// Reachable`); the composition root builds the one implementation, over Podman's libpod REST API
// (runtime/podman), whose JSON types are visible nowhere outside that folder.
//
// The ports' names are re-exported here for code that speaks about several concerns at once.

import type { Builds } from './ports/builds.js';
import type { Containers } from './ports/containers.js';
import type { Images } from './ports/images.js';
import type { Networks } from './ports/networks.js';
import type { Secrets } from './ports/secrets.js';
import type { Volumes } from './ports/volumes.js';

export * from './ports/builds.js';
export * from './ports/container-specs.js';
export * from './ports/containers.js';
export * from './ports/images.js';
export * from './ports/labels.js';
export * from './ports/networks.js';
export * from './ports/runtime-error.js';
export * from './ports/secrets.js';
export * from './ports/volumes.js';

/** Whether the runtime answers at all (the service's health, the start's first call). */
export interface Reachable {
  /** Resolves when the runtime answers; rejects with an unreachable RuntimeError when it does not. */
  ping(): Promise<void>;
}

export interface ContainerRuntime extends Reachable, Containers, Images, Networks, Volumes, Secrets, Builds {}
