// What an image's compatibility rank means (GET /images orders by it).

export const RANKS: Readonly<Record<number, string>> = {
  1: 'official agent image',
  2: 'verified compatible (glibc, bash and git)',
  3: 'standard glibc image',
  4: 'incompatible (Alpine/musl or no C library)',
};

export function rankText(rank: number): string {
  return RANKS[rank] ?? `rank ${rank}`;
}

/** repository:tag, or the repository alone for an image named by digest only. */
export function imageReference(image: { repository: string; tag: string }): string {
  return image.tag ? `${image.repository}:${image.tag}` : image.repository;
}
