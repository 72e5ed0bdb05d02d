// How well an image suits the engine, from facts probed in its files. The ranks GET /images answers:
// 1 the official agent image, 2 verified compatible, 3 standard glibc, 4 incompatible (Alpine/musl).
// The engine is a glibc binary, so an image without the glibc loader (musl, or none at all as in a
// FROM-scratch data image) cannot run it and ranks 4. "Verified compatible" means glibc plus the
// tools the engine itself shells out to: bash (its Bash tool) and git (its repository awareness).

export const ENGINE_REQUIRED_TOOLS = ['bash', 'git'] as const;

/** Tools reported in `tools`, looked for in the usual binary directories. */
export const DETECTED_TOOLS = ['bash', 'sh', 'git', 'curl', 'wget', 'python3', 'node', 'npm', 'make', 'gcc'] as const;
export const TOOL_DIRECTORIES = ['/usr/bin', '/bin', '/usr/local/bin'] as const;

export const MUSL_LOADERS = ['/lib/ld-musl-x86_64.so.1', '/lib/ld-musl-aarch64.so.1', '/lib/ld-musl-armhf.so.1'] as const;
export const GLIBC_LOADERS = ['/lib64/ld-linux-x86-64.so.2', '/lib/ld-linux-aarch64.so.1', '/lib/ld-linux-armhf.so.3'] as const;

/** The label an image carries when it was built as Berth's agent image (scripts/build-images.sh). */
export const OFFICIAL_LABEL = 'io.berth.agent-image';

export type CompatibilityRank = 1 | 2 | 3 | 4;

export interface ImageFacts {
  readonly musl: boolean;
  readonly glibc: boolean;
  /** Detected tools, in DETECTED_TOOLS order. */
  readonly tools: readonly string[];
}

export interface Compatibility {
  readonly rank: CompatibilityRank;
  readonly compatible: boolean;
}

/** Every path the probe looks at, so that one probe container answers all questions. */
export function probedPaths(): string[] {
  const toolPaths = DETECTED_TOOLS.flatMap((tool) => TOOL_DIRECTORIES.map((dir) => `${dir}/${tool}`));
  return [...MUSL_LOADERS, ...GLIBC_LOADERS, ...toolPaths];
}

export function factsFromPaths(present: ReadonlySet<string>): ImageFacts {
  return {
    musl: MUSL_LOADERS.some((path) => present.has(path)),
    glibc: GLIBC_LOADERS.some((path) => present.has(path)),
    tools: DETECTED_TOOLS.filter((tool) => TOOL_DIRECTORIES.some((dir) => present.has(`${dir}/${tool}`))),
  };
}

/** Why the engine cannot run in an image: the one rule both GET /images and every run apply. */
export type Incompatibility = 'musl' | 'no_glibc';

export function engineIncompatibility(facts: ImageFacts): Incompatibility | undefined {
  if (facts.musl) return 'musl';
  if (!facts.glibc) return 'no_glibc';
  return undefined;
}

export function rankImage(facts: ImageFacts, official: boolean): Compatibility {
  if (engineIncompatibility(facts) !== undefined) return { rank: 4, compatible: false };
  if (official) return { rank: 1, compatible: true };
  if (ENGINE_REQUIRED_TOOLS.every((tool) => facts.tools.includes(tool))) return { rank: 2, compatible: true };
  return { rank: 3, compatible: true };
}
