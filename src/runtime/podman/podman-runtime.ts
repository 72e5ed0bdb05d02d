// ContainerRuntime over Podman's libpod REST API: one part per concern (./podman-containers.ts,
// ./podman-images.ts, ./podman-networks.ts, ./podman-volumes.ts, ./podman-secrets.ts, ./podman-builds.ts)
// over one client, joined into one object. Containers and networks share the bridges whose addresses
// are pinned as containers start on them.
import type { ContainerRuntime } from '../container-runtime.js';
import type { Builds } from '../ports/builds.js';
import type { Containers } from '../ports/containers.js';
import type { Images } from '../ports/images.js';
import type { Networks } from '../ports/networks.js';
import type { Secrets } from '../ports/secrets.js';
import type { Volumes } from '../ports/volumes.js';
import type { PodmanClient } from './client.js';
import { BridgeAddresses } from './bridge-address.js';
import { joinParts } from './joined-parts.js';
import { PodmanBuilds } from './podman-builds.js';
import { PodmanContainers } from './podman-containers.js';
import { PodmanImages } from './podman-images.js';
import { PodmanNetworks } from './podman-networks.js';
import { PodmanSecrets } from './podman-secrets.js';
import { PodmanVolumes } from './podman-volumes.js';

/** The runtime, and what only the composition root uses: the host's network isolation over Berth's networks. */
export interface PodmanRuntime extends ContainerRuntime, Pick<PodmanNetworks, 'isolateNetworks'> {}

// The methods come from the parts (joinParts), assigned in the constructor; the interface above declares them.
export class PodmanRuntime {
  readonly #client: PodmanClient;

  constructor(
    client: PodmanClient,
    warn: (details: Record<string, unknown>, message: string) => void = () => undefined,
    /** Every container's log is capped at this size (SERVICE_CONTAINER_LOG_MAX_BYTES); undefined: Podman's default. */
    logMaxBytes?: number,
    /** A local image with /bin/sh whose containers readSecret creates (never starts) to read a secret. */
    secretReaderImage?: string,
  ) {
    this.#client = client;
    const bridges = new BridgeAddresses({
      interfaceOf: async (network) => {
        const inspect = await client.jsonIfFound<{ driver?: string; network_interface?: string }>(`/networks/${encodeURIComponent(network)}/json`);
        return inspect?.driver === 'bridge' ? inspect.network_interface : undefined;
      },
      warn,
    });
    const images = new PodmanImages(client);
    // Typed as the whole runtime but ping: a concern left out of the parts does not compile.
    const parts: Omit<PodmanRuntime, 'ping'> = joinParts<[Containers, Images, Networks & Pick<PodmanNetworks, 'isolateNetworks'>, Volumes, Secrets, Builds]>(
      new PodmanContainers(client, bridges, logMaxBytes),
      images,
      new PodmanNetworks(client, bridges),
      new PodmanVolumes(client),
      new PodmanSecrets(client, secretReaderImage),
      new PodmanBuilds(client, images),
    );
    Object.assign(this, parts);
  }

  async ping(): Promise<void> {
    await this.#client.call('/_ping');
  }
}
