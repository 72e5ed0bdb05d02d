// Shell completion scripts generated from the program's own command tree, so every command and option
// commander knows is offered and nothing else: `source <(berth completion bash)` (or zsh).
import type { Command, Option } from 'commander';

export const SHELLS = ['bash', 'zsh'] as const;
export type Shell = (typeof SHELLS)[number];

interface Entry {
  readonly name: string;
  readonly description: string;
}

interface ValueOption {
  readonly flags: readonly string[];
  /** The accepted values, or empty when any value goes (nothing to offer). */
  readonly choices: readonly string[];
}

/** One command of the tree: where it is (`/jobs/ls`), what may follow it. */
interface Node {
  readonly path: string;
  /** Its subcommands, or the values its first argument accepts (`completion bash|zsh`). */
  readonly commands: readonly Entry[];
  readonly options: readonly Entry[];
  readonly valueOptions: readonly ValueOption[];
  /** Whether an argument is a local directory (`<dir>`: berth push, berth pull): offered from the file system. */
  readonly directories: boolean;
}

export function completionScript(program: Command, shell: Shell): string {
  const nodes = commandTree(program);
  return shell === 'bash' ? bashScript(program.name(), nodes) : zshScript(program.name(), nodes);
}

function commandTree(program: Command): Node[] {
  const help = program.createHelp();
  const globals = help.visibleOptions(program);
  const nodes: Node[] = [];
  const visit = (command: Command, path: string) => {
    const subcommands = help.visibleCommands(command).filter((sub) => sub.name() !== 'help' || command === program);
    const options = command === program ? globals : [...help.visibleOptions(command), ...globals.filter((o) => o.long !== '--help' && o.long !== '--version')];
    nodes.push({
      path,
      commands: [
        ...subcommands.map((sub) => ({ name: sub.name(), description: sub.summary() || sub.description() })),
        ...(command.registeredArguments[0]?.argChoices ?? []).map((choice) => ({ name: choice, description: command.registeredArguments[0]!.description })),
      ],
      options: options.flatMap((option) => optionNames(option).map((name) => ({ name, description: option.description }))),
      valueOptions: options.filter((option) => option.required || option.optional).map((option) => ({ flags: optionNames(option), choices: option.argChoices ?? [] })),
      directories: command.registeredArguments.some((argument) => argument.name() === 'dir'),
    });
    for (const sub of subcommands) if (sub.name() !== 'help') visit(sub, `${path}/${sub.name()}`);
  };
  visit(program, '');
  return nodes;
}

function optionNames(option: Option): string[] {
  return [option.long, option.short].filter((name): name is string => name !== undefined);
}

function bashScript(name: string, nodes: readonly Node[]): string {
  const fn = `_${name}_completion`;
  const paths = nodes.filter((node) => node.path !== '').map((node) => node.path);
  const branches = nodes.map((node) => {
    const values = node.valueOptions.map((option) =>
      option.choices.length > 0
        ? `        ${option.flags.join('|')}) COMPREPLY=($(compgen -W ${quoted(option.choices.join(' '))} -- "$cur")); return ;;`
        : `        ${option.flags.join('|')}) return ;;`,
    );
    return [
      `    ${quoted(node.path)})`,
      ...(values.length > 0 ? ['      case "$prev" in', ...values, '      esac'] : []),
      `      commands=${quoted(node.commands.map((c) => c.name).join(' '))}`,
      `      options=${quoted(node.options.map((o) => o.name).join(' '))}`,
      ...(node.directories ? ['      dirs=1'] : []),
      '      ;;',
    ].join('\n');
  });
  return `# ${name} completion for bash. Load it with: source <(${name} completion bash)
${fn}() {
  local cur prev word cmdpath commands options i dirs=""
  cur="\${COMP_WORDS[COMP_CWORD]}"
  prev="\${COMP_WORDS[COMP_CWORD-1]}"
  cmdpath=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    case "$cmdpath/$word" in
      ${paths.map(quoted).join('|')}) cmdpath="$cmdpath/$word" ;;
    esac
  done
  case "$cmdpath" in
${branches.join('\n')}
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$options" -- "$cur"))
  elif [[ -n "$dirs" ]]; then
    COMPREPLY=($(compgen -d -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$commands" -- "$cur"))
  fi
}
complete -F ${fn} ${name}
`;
}

function zshScript(name: string, nodes: readonly Node[]): string {
  const fn = `_${name}`;
  const paths = nodes.filter((node) => node.path !== '').map((node) => node.path);
  const describe = (entries: readonly Entry[]) => entries.map((e) => quoted(`${e.name.replace(/:/g, '\\:')}:${e.description}`)).join(' ');
  const branches = nodes.map((node) => {
    const values = node.valueOptions.map((option) =>
      option.choices.length > 0
        ? `        (${option.flags.join('|')}) compadd -- ${option.choices.map(quoted).join(' ')}; return ;;`
        : `        (${option.flags.join('|')}) return ;;`,
    );
    return [
      `    (${quoted(node.path)})`,
      ...(values.length > 0 ? ['      case "$words[CURRENT-1]" in', ...values, '      esac'] : []),
      `      commands=(${describe(node.commands)})`,
      `      options=(${describe(node.options)})`,
      ...(node.directories ? ['      dirs=1'] : []),
      '      ;;',
    ].join('\n');
  });
  // `path` is special in zsh (it is $PATH as an array), hence `cmdpath`.
  return `#compdef ${name}
# ${name} completion for zsh. Load it with: source <(${name} completion zsh)
${fn}() {
  local word cmdpath="" i dirs=""
  local -a commands options
  for ((i = 2; i < CURRENT; i++)); do
    word="$words[i]"
    case "$cmdpath/$word" in
      (${paths.map(quoted).join('|')}) cmdpath="$cmdpath/$word" ;;
    esac
  done
  case "$cmdpath" in
${branches.join('\n')}
  esac
  if [[ "$words[CURRENT]" == -* ]]; then
    _describe -t options option options
  elif [[ -n "$dirs" ]]; then
    _files -/
  else
    _describe -t commands command commands
  fi
}
if (( $+functions[compdef] )); then compdef ${fn} ${name}; fi
`;
}

/** A word in single quotes, as bash and zsh both read it. */
function quoted(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}
