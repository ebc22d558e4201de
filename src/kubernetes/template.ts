import { parse as parseYaml } from 'yaml';

export class JobTemplateError extends Error {}

/** Parses a manifest template; YAML errors become a JobTemplateError naming the first problem. */
export function parseTemplate(text: string): unknown {
  try {
    return parseYaml(text);
  } catch (err) {
    throw new JobTemplateError(`the Job template is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
}

/**
 * Replaces {{name}} inside the parsed manifest's strings, never in its text, so a value cannot
 * change the manifest's structure. An unknown name is an error that lists the known ones.
 */
export function fillPlaceholders(value: unknown, values: Readonly<Record<string, string>>): unknown {
  if (typeof value === 'string') {
    return value.replace(/\{\{\s*([A-Za-z]+)\s*\}\}/g, (_match, name: string) => {
      const replacement = values[name];
      if (replacement === undefined) {
        throw new JobTemplateError(
          `uses {{${name}}}, which Rein does not know; the placeholders are ${Object.keys(values)
            .map((p) => `{{${p}}}`)
            .join(', ')}`,
        );
      }
      return replacement;
    });
  }
  if (Array.isArray(value)) return value.map((v) => fillPlaceholders(v, values));
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fillPlaceholders(v, values)]));
  return value;
}
