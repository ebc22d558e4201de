/**
 * Names of policy versions, aliases and backends: what model names look like (`Qwen/Qwen3-0.6B`,
 * `llama3.1:8b`, `run-…-it2`). A version name goes out in the x-rein-policy-version header, so
 * control characters and non-ASCII cannot be allowed; the leading letter or digit keeps
 * `__proto__` out of every table.
 */
export const ROUTING_NAME_MAX_LENGTH = 200;
export const ROUTING_NAME_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,${ROUTING_NAME_MAX_LENGTH - 1}}$`);

/** Why a policy version, alias or backend name cannot be used; undefined when it can. */
export function routingNameProblem(name: string): string | undefined {
  if (ROUTING_NAME_PATTERN.test(name)) return undefined;
  return `${JSON.stringify(name)} is not a usable name: use 1 to ${ROUTING_NAME_MAX_LENGTH} ASCII letters, digits and . _ : / @ + -, starting with a letter or digit`;
}

/**
 * Model names that are both an alias and a policy version. Harnesses name either in `model`, so
 * one name must mean one thing: otherwise the alias silently wins and /v1/models lists it twice.
 */
export function aliasesNamedLikeVersions(
  policies: Record<string, unknown>,
  aliases: Record<string, unknown>,
): string[] {
  return Object.keys(aliases).filter((alias) => Object.hasOwn(policies, alias));
}
