"""Shell completion: `rlsup completion bash|zsh|fish` prints a script; `rlsup __complete jobs` feeds it job ids
and names (`rlsup __complete jobs experiments` experiments' names too)."""
from __future__ import annotations

import argparse

from rlsup import paths
from rlsup.jobs import store_file
from rlsup.jobs.store import Store

# Positionals that name a job or a run: completed with the store's ids and names (run dirs by path), and with
# experiments' names where the argument is marked cli.arguments.names_experiments.
JOB_METAVARS = {"JOB", "RUN"}
REFERENCES = ("jobs", "experiments")


def register(subparsers: argparse._SubParsersAction) -> None:
    completion = subparsers.add_parser("completion", help="print a shell completion script (bash, zsh or fish)")
    completion.add_argument("shell", choices=["bash", "zsh", "fish"],
                            help="e.g. eval \"$(rlsup completion bash)\" in ~/.bashrc")
    # Every command's parser, filled in as the parser registers the rest: the parser is the one list of commands
    # and options, and this reads it without importing the module that builds it.
    completion.set_defaults(handler=command_completion, commands=subparsers.choices)
    # No help= keeps it out of `rlsup --help`: only the scripts call it.
    hidden = subparsers.add_parser("__complete")
    hidden.add_argument("what", choices=REFERENCES, nargs="+",
                        help="jobs: their ids and names; experiments: their names; one a line")
    hidden.set_defaults(handler=command_complete)


def command_complete(args: argparse.Namespace) -> int:
    """Job ids and names, and experiments' names, one a line; nothing (and no home made) when there are no jobs yet."""
    if not store_file.exists(paths.home_path()):
        return 0
    with Store(paths.home_path()) as store:
        jobs = store.jobs()
    words = []
    if "jobs" in args.what:
        words += [word for job in jobs for word in (str(job.id), job.name)]
    if "experiments" in args.what:
        words += list(dict.fromkeys(job.experiment for job in jobs if job.experiment))
    # One word a line: a name holding a line break or a control character (stored before names were sanitised
    # on every path) would be two words, or act on the terminal; it is left out, and its id still completes.
    for word in words:
        if word.isprintable():
            print(word)
    return 0


def command_completion(args: argparse.Namespace) -> int:
    commands = visible_commands(args.commands)
    print({"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[args.shell](commands))
    return 0


def visible_commands(parsers: dict[str, argparse.ArgumentParser]) -> dict[str, tuple[list[argparse.Action], str]]:
    """Each subcommand (hidden ones left out): its options, and the references its positional takes, as
    `__complete` names them ("jobs", "jobs experiments"; "" for none)."""
    commands = {}
    for name, subparser in parsers.items():
        if name.startswith("__"):
            continue
        options = [action for action in subparser._actions if action.option_strings]
        commands[name] = (options, references(subparser))
    return commands


def references(subparser: argparse.ArgumentParser) -> str:
    positionals = [action for action in subparser._actions
                   if not action.option_strings and action.metavar in JOB_METAVARS]
    if not positionals:
        return ""
    return " ".join(REFERENCES) if any(getattr(action, "experiments", False) for action in positionals) else "jobs"


def bash_script(commands: dict) -> str:
    cases = "\n".join(f"        {name}) options=\"{' '.join(flag for action in options for flag in action.option_strings)}"
                      f"\"; references=\"{taken}\";;" for name, (options, taken) in commands.items())
    # What `rlsup __complete` prints is data: a job name could read `$(touch x)`. compgen -W expands its word
    # list as the shell expands a command line, so it only ever gets the fixed command names; everything else
    # is read line by line with `read -r` and compared with the typed prefix by [[ ]], which expand nothing.
    return f"""# rlsup completion for bash: eval "$(rlsup completion bash)"
_rlsup_offer() {{
    local word
    while IFS= read -r word; do
        [[ -n $word && $word == "$1"* ]] && COMPREPLY+=("$word")
    done
}}
_rlsup() {{
    local current=${{COMP_WORDS[COMP_CWORD]}} options="" references=""
    COMPREPLY=()
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "{' '.join(commands)}" -- "$current"))
        return
    fi
    case "${{COMP_WORDS[1]}}" in
{cases}
    esac
    if [[ $current == -* ]]; then
        COMPREPLY=($(compgen -W "$options" -- "$current"))
    elif [ -n "$references" ]; then
        _rlsup_offer "$current" < <(rlsup __complete $references 2>/dev/null; compgen -d -- "$current")
    else
        _rlsup_offer "$current" < <(compgen -f -- "$current")
    fi
}}
complete -o filenames -F _rlsup rlsup"""


def zsh_script(commands: dict) -> str:
    # zsh runs the bash function through its bashcompinit layer: one script to keep true, not two.
    return ("# rlsup completion for zsh: eval \"$(rlsup completion zsh)\"\n"
            "autoload -U +X compinit && compinit\nautoload -U +X bashcompinit && bashcompinit\n"
            + bash_script(commands))


def fish_script(commands: dict) -> str:
    lines = ["# rlsup completion for fish: rlsup completion fish | source", "complete -c rlsup -f"]
    for name, (options, taken) in commands.items():
        lines.append(f"complete -c rlsup -n __fish_use_subcommand -a {name}")
        condition = f"'__fish_seen_subcommand_from {name}'"
        for action in options:
            flags = " ".join(f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"
                             for flag in action.option_strings)
            # Inside fish's single quotes only \\ and \' are escapes: "file's" stays as written.
            described = (action.help or "").replace("\\", "\\\\").replace("'", "\\'")
            lines.append(f"complete -c rlsup -n {condition} {flags} -d '{described}'")
        if taken:
            lines.append(f"complete -c rlsup -n {condition} -a '(rlsup __complete {taken} 2>/dev/null)'")
    return "\n".join(lines)
