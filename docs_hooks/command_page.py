"""The command reference: every `rlsup` command, its usage, arguments and options, read from the argparse parser."""
from __future__ import annotations

import argparse

from page_tables import code, table
from rlsup.cli.parser import build_parser

ARGUMENT_HEADER = ("Argument", "Default", "Meaning")


def render() -> str:
    parser = build_parser()
    commands = subcommands(parser)
    parts = [overview(parser, commands)]
    parts += [command_section(name, help_text, command) for name, help_text, command in commands]
    return "\n\n".join(parts)


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each command `rlsup --help` lists, in its order; a hidden one (no help) is left out."""
    action = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return [(choice.dest, choice.help, action.choices[choice.dest]) for choice in action._choices_actions]


def overview(parser: argparse.ArgumentParser, commands: list) -> str:
    rows = [(f"[{code('rlsup ' + name)}](#{name})", help_text) for name, help_text, _ in commands]
    options = [(code(", ".join(action.option_strings)), action.help) for action in parser._actions
               if action.option_strings]
    return "\n\n".join([parser.description, table(("Command", "What it does"), rows),
                        "Options of `rlsup` itself:", table(("Option", "Meaning"), options)])


def command_section(name: str, help_text: str, command: argparse.ArgumentParser) -> str:
    usage = " ".join(command.format_usage().removeprefix("usage: ").split())
    rows = [argument_row(action) for action in command._actions if not isinstance(action, argparse._HelpAction)]
    parts = [f"## {code('rlsup ' + name)} {{#{name}}}", f"{help_text[0].upper()}{help_text[1:]}.",
             f"```text\n{usage}\n```"]
    if rows and not any(default for _, default, _ in rows):  # the column only where a default is declared
        parts.append(table((ARGUMENT_HEADER[0], ARGUMENT_HEADER[2]), ((shown, meaning) for shown, _, meaning in rows)))
    elif rows:
        parts.append(table(ARGUMENT_HEADER, rows))
    return "\n\n".join(parts)


def argument_row(action: argparse.Action) -> tuple[str, str, str]:
    # As argparse's usage line spells a value: its metavar, else its choices in braces, else its name.
    value = action.metavar or ("{" + ",".join(map(str, action.choices)) + "}" if action.choices else None)
    if action.option_strings:
        shown = ", ".join(action.option_strings)
        if action.nargs != 0:
            shown += " " + (value or action.dest.upper())
    else:
        shown = value or action.dest
    meaning = action.help or ""
    if action.choices:
        meaning = f"one of {', '.join(code(choice) for choice in action.choices)}" + (f": {meaning}" if meaning else "")
    if action.required and action.option_strings:
        meaning = f"(required) {meaning}"
    default = "" if action.default in (None, False, argparse.SUPPRESS) else code(action.default)
    return code(shown), default, meaning
