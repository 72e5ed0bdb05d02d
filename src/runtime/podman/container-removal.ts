// A container's forced removal, shared by every part of the Podman runtime that creates containers of its
// own (probes, secret readers, image-tree holders) and by the containers part itself.
import { PodmanApiError, type PodmanClient } from './client.js';

/** Removes the container, its anonymous volumes with it; succeeds when it is already gone. */
export async function removeContainer(client: PodmanClient, id: string): Promise<void> {
  // Podman 4.3 sometimes answers a removal of a container that ran in a user namespace with `unlinkat
  // …/userdata/shm: device or resource busy` while the kernel is still tearing the container's mounts
  // down; the container is removed all the same a moment later. Such answers are retried (a retry finds
  // it gone: 404) rather than reported as a failed removal.
  for (let attempt = 1; ; attempt++) {
    try {
      await client.call(`/containers/${id}`, {
        method: 'DELETE',
        query: { force: true, v: true, timeout: 0 },
        accept: [404],
      });
      return;
    } catch (error) {
      const busy = error instanceof PodmanApiError && error.statusCode === 500 && /device or resource busy/.test(error.message);
      if (!busy || attempt >= 5) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
    }
  }
}
