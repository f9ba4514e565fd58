// `loom completion bash|zsh`: a shell completion script made from the command tree itself,
// so a new verb or flag completes without editing this file.
import { Command, type Option } from "commander";
import { loadCrds } from "../resources/crds.ts";
import { UsageError } from "./client.ts";
import { out } from "./common.ts";

type Entry = { path: string; words: string[] };

const flags = (opts: readonly Option[]) => opts.flatMap((o) => [o.long, o.short].filter((f): f is string => !!f));

/** Per command path ("", "get", "certs create"): the words that may come next. */
export function completionTable(program: Command): Entry[] {
  const kinds = [...loadCrds().values()].flatMap((c) => [c.plural, c.singular]).concat(["events"]);
  const entries: Entry[] = [];
  const walk = (c: Command, path: string) => {
    const subs = c.commands.filter((s) => s.name() !== "help").map((s) => s.name());
    const takesKind = c.registeredArguments.some((a) => /type|kind/.test(a.name()));
    entries.push({ path, words: [...subs, ...(takesKind ? kinds : []), ...flags(c.options), "--help"] });
    for (const s of c.commands) walk(s, path ? `${path} ${s.name()}` : s.name());
  };
  walk(program, "");
  return entries;
}

function bash(entries: Entry[]): string {
  const cases = entries.map((e) => `    "${e.path}") words="${e.words.join(" ")}" ;;`).join("\n");
  return `# loom bash completion: source <(loom completion bash)
_loom() {
  local cur path="" w i
  cur="\${COMP_WORDS[COMP_CWORD]}"
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && continue
    case "\${path:+$path }$w" in
${entries
  .filter((e) => e.path)
  .map((e) => `      "${e.path}") path="${e.path}" ;;`)
  .join("\n")}
    esac
  done
  local words
  case "$path" in
${cases}
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _loom loom
`;
}

function zsh(entries: Entry[]): string {
  return `#compdef loom
# loom zsh completion: source <(loom completion zsh)
autoload -U +X bashcompinit && bashcompinit
${bash(entries).split("\n").slice(1).join("\n")}`;
}

/** `build` is the whole program (main.ts passes it in), whose commands the script completes. */
export function completionCommand(build: (argv: string[]) => Promise<Command>): Command {
  return new Command("completion")
    .description("print a shell completion script: source <(loom completion bash), or zsh")
    .argument("<shell>", "bash or zsh")
    .action(async (shell: string) => {
      if (shell !== "bash" && shell !== "zsh")
        throw new UsageError(`completion: unknown shell ${JSON.stringify(shell)}; one of bash, zsh`);
      const entries = completionTable(await build(["node", "loom"]));
      out(shell === "bash" ? bash(entries) : zsh(entries));
    });
}
