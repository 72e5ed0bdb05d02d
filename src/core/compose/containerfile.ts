// What a stack's Containerfile may ask of a build, read before Podman sees it (docs/compose.md, "Builds").
// Only a small part of the grammar matters for the sandbox: which images the build starts from (FROM,
// COPY/ADD --from), RUN flags (`--mount` binds host paths and shares caches, `--network` leaves the private
// network namespace), ADD of URLs (fetched by Podman itself, on the host's network) and ONBUILD (whose
// triggers would run unchecked in a later stage). Anything this scanner cannot read with certainty is
// refused rather than guessed at.

export class ContainerfileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ContainerfileError';
  }
}

/** An image the build reads that is not one of its own stages: it must be allowed and present locally. */
export interface ExternalImage {
  readonly reference: string;
  /** Where it is named, e.g. `line 3 (FROM)`. */
  readonly at: string;
}

interface Instruction {
  readonly keyword: string;
  readonly rest: string;
  readonly line: number;
}

const fail = (message: string): never => {
  throw new ContainerfileError(message);
};

/**
 * The external images a Containerfile reads, with its global ARG defaults (overridden by the build's
 * args) substituted into FROM; throws ContainerfileError for what a build may not do.
 */
export function checkContainerfile(text: string, buildArgs: Readonly<Record<string, string>>): ExternalImage[] {
  const instructions = instructionsOf(text);
  const globalArgs = new Map<string, string>();
  const stages: string[] = [];
  const images: ExternalImage[] = [];
  let seenFrom = false;
  for (const { keyword, rest, line } of instructions) {
    const at = `line ${line} (${keyword})`;
    switch (keyword) {
      case 'ARG':
        if (!seenFrom) {
          for (const [name, value] of declaredArgs(rest, at)) {
            const given = buildArgs[name] ?? value;
            if (given === undefined) globalArgs.delete(name);
            else globalArgs.set(name, given);
          }
        }
        break;
      case 'FROM': {
        seenFrom = true;
        const words = rest.split(/\s+/).filter(Boolean);
        if (words.some((word) => word.startsWith('--'))) fail(`${at}: flags of FROM (such as --platform) are not supported; the host's platform is used`);
        if (words.length !== 1 && !(words.length === 3 && words[1]!.toLowerCase() === 'as')) fail(`${at}: expected "FROM image [AS name]"`);
        const image = substitute(words[0]!, globalArgs, at);
        if (image === '') fail(`${at}: the image is empty after substituting its ARGs`);
        if (image !== 'scratch' && !stages.includes(image.toLowerCase())) images.push({ reference: image, at });
        stages.push(words.length === 3 ? words[2]!.toLowerCase() : `\u0000${stages.length}`);
        break;
      }
      case 'COPY':
      case 'ADD': {
        if (!seenFrom) fail(`${at}: comes before the first FROM`);
        const { flags, body } = leadingFlags(rest);
        for (const flag of flags) {
          if (!flag.startsWith('--from=')) continue;
          const from = flag.slice('--from='.length);
          if (from.includes('$')) fail(`${at}: --from with a variable is not supported`);
          const stageIndex = /^\d+$/.test(from) ? Number(from) : undefined;
          if (stageIndex !== undefined) {
            if (stageIndex >= stages.length - 1) fail(`${at}: --from=${from} names no earlier stage`);
          } else if (!stages.includes(from.toLowerCase())) images.push({ reference: from, at });
        }
        if (keyword === 'ADD' && /(?:^|[\s"'[,])(?:[a-z][a-z0-9+.-]*:\/\/|git@)/i.test(body)) {
          fail(`${at}: ADD of a URL is refused (Podman would fetch it on the host's network); put the file in the build context`);
        }
        break;
      }
      case 'RUN': {
        const { flags } = leadingFlags(rest);
        if (flags.length > 0) {
          fail(`${at}: RUN ${flags[0]!.split('=')[0]} is refused (a build step gets no host paths, shared caches, secrets or networks); copy what it needs into the build context`);
        }
        break;
      }
      case 'ONBUILD':
        fail(`${at}: ONBUILD is not supported (its triggers would run unchecked in a later build)`);
        break;
      default:
        break;
    }
  }
  if (!seenFrom) fail('it has no FROM instruction');
  return images;
}

/** Logical instructions: parser directives read, comments dropped, continuation lines joined. */
function instructionsOf(text: string): Instruction[] {
  const lines = text.split(/\r?\n/);
  let escape = '\\';
  let index = 0;
  // Parser directives: `# name=value` lines at the very top, before any blank line, comment or instruction.
  for (; index < lines.length; index += 1) {
    const directive = /^\s*#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$/.exec(lines[index]!);
    if (!directive) break;
    if (directive[1]!.toLowerCase() === 'escape') {
      if (directive[2] !== '\\' && directive[2] !== '`') fail(`line ${index + 1}: escape must be \\ or \``);
      escape = directive[2]!;
    }
  }
  const instructions: Instruction[] = [];
  let pending: { text: string; line: number } | undefined;
  for (; index < lines.length; index += 1) {
    const physical = lines[index]!;
    const trimmed = physical.trim();
    if (trimmed.startsWith('#')) continue;
    if (trimmed === '' && pending === undefined) continue;
    const continues = trimmed.endsWith(escape);
    const content = continues ? trimmed.slice(0, -1) : trimmed;
    pending = pending === undefined ? { text: content, line: index + 1 } : { text: `${pending.text} ${content}`, line: pending.line };
    if (continues) continue;
    const match = /^(\S+)\s*(.*)$/s.exec(pending.text.trim());
    if (match) instructions.push({ keyword: match[1]!.toUpperCase(), rest: match[2]!.trim(), line: pending.line });
    pending = undefined;
  }
  if (pending !== undefined) fail(`line ${pending.line}: the last instruction ends with a line continuation`);
  return instructions;
}

function leadingFlags(rest: string): { flags: string[]; body: string } {
  const flags: string[] = [];
  let body = rest;
  for (;;) {
    const match = /^(--\S+)\s*(.*)$/s.exec(body);
    if (!match) return { flags, body };
    flags.push(match[1]!);
    body = match[2]!;
  }
}

/** `ARG a`, `ARG a=1 b="two"`: names with their defaults (undefined when none). */
function declaredArgs(rest: string, at: string): [string, string | undefined][] {
  const declared: [string, string | undefined][] = [];
  const pattern = /([A-Za-z_][A-Za-z0-9_]*)(?:=("(?:[^"\\]|\\.)*"|'[^']*'|\S*))?(?:\s+|$)/y;
  let position = 0;
  while (position < rest.length) {
    pattern.lastIndex = position;
    const match = pattern.exec(rest);
    if (!match || match[0] === '') fail(`${at}: cannot read "${rest}"`);
    const raw = match![2];
    const value = raw === undefined ? undefined : /^["']/.test(raw) ? raw.slice(1, -1) : raw;
    declared.push([match![1]!, value]);
    position = pattern.lastIndex;
  }
  return declared;
}

/** `$A`, `${A}`, `${A:-x}`, `${A-x}`, `${A:+x}`, `${A+x}` with the global ARGs; anything else is refused. */
function substitute(word: string, args: ReadonlyMap<string, string>, at: string): string {
  return word.replace(/\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-+])([^}$]*))?\}|([A-Za-z_][A-Za-z0-9_]*))|\$/g, (_whole, braced, operator, operand, bare) => {
    const name = (braced ?? bare) as string | undefined;
    if (name === undefined) return fail(`${at}: "${word}" uses a form of "$" Berth does not read`);
    const value = args.get(name);
    const set = value !== undefined && (operator === undefined || !operator.startsWith(':') || value !== '');
    if (operator === undefined) return value ?? '';
    if (operator.endsWith('-')) return set ? value! : (operand as string);
    return set ? (operand as string) : '';
  });
}
