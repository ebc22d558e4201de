import type { Command, Option } from 'commander';
import { buildProgram } from '../../src/cli/main.js';
import { GENERATED_NOTE } from './config-reference.js';
import { cell } from './json-schema.js';
import { slug as anchor } from './markdown.js';

/**
 * The whole `rein` program, every module loaded, as `rein --help` sees it with no config: the reference never depends
 * on a local rein.yaml or REIN_* variable.
 */
export async function reinProgram(): Promise<Command> {
  return buildProgram(['node', 'rein'], { settings: 'defaults' });
}

/** Every command under a program, parents first, with its full name (`policy serve`). */
export function allCommands(program: Command): Array<{ name: string; command: Command }> {
  const out: Array<{ name: string; command: Command }> = [];
  const visit = (command: Command, prefix: string) => {
    for (const sub of command.commands) {
      const name = prefix ? `${prefix} ${sub.name()}` : sub.name();
      out.push({ name, command: sub });
      visit(sub, name);
    }
  };
  visit(program, '');
  return out;
}

/** docs/reference/cli.md: every command and subcommand with its arguments and options, from commander. */
export async function cliReference(): Promise<string> {
  const program = await reinProgram();
  const commands = allCommands(program);
  const lines = [
    '# CLI reference',
    '',
    GENERATED_NOTE('the commander program in `src/cli/` (`buildProgram`)'),
    '',
    `\`rein\`: ${program.description()}. What the commands are for, with examples: [Commands](../commands.md). Addresses and ports below are the defaults; \`rein <command> --help\` shows the ones your config sets.`,
    '',
    '## Global options',
    '',
    'Given before or after the command name.',
    '',
    ...optionTable(program.options),
    '',
    '## Commands',
    '',
    ...commands.map(
      ({ name, command }) => `- [\`rein ${name}\`](#${anchor(`rein ${name}`)}): ${cell(command.description())}`,
    ),
  ];
  for (const { name, command } of commands) lines.push('', ...commandSection(name, command));
  return `${lines.join('\n')}\n`;
}

function commandSection(name: string, command: Command): string[] {
  const lines = [
    `### rein ${name}`,
    '',
    '```',
    `rein ${name} ${command.usage()}`,
    '```',
    '',
    sentence(command.description()),
  ];
  const args = command.registeredArguments;
  if (args.length > 0) {
    lines.push('', '| argument | required | description |', '|---|---|---|');
    for (const a of args)
      lines.push(
        `| \`${a.name()}${a.variadic ? '...' : ''}\` | ${a.required ? 'yes' : 'no'} | ${cell(a.description)} |`,
      );
  }
  const options = command.options.filter((o) => !o.hidden);
  if (options.length > 0) lines.push('', ...optionTable(options));
  if (command.commands.length > 0) {
    lines.push(
      '',
      `Subcommands: ${command.commands.map((c) => `[\`${c.name()}\`](#${anchor(`rein ${name} ${c.name()}`)})`).join(', ')}.`,
    );
  }
  return lines;
}

function optionTable(options: readonly Option[]): string[] {
  return [
    '| option | description | default |',
    '|---|---|---|',
    ...options.map((o) => `| \`${o.flags}\` | ${cell(o.description)} | ${defaultOf(o)} |`),
  ];
}

function defaultOf(option: Option): string {
  const value: unknown = option.defaultValue;
  if (value === undefined || (option.negate && value === true) || (Array.isArray(value) && value.length === 0))
    return '';
  return `\`${cell(String(value))}\``;
}

/** A description as a sentence: capitalised, with a full stop. */
export function sentence(text: string): string {
  const capitalised = text.charAt(0).toUpperCase() + text.slice(1);
  return /[.?!]$/.test(capitalised) ? capitalised : `${capitalised}.`;
}
