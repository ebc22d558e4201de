import type { CompiledQuery } from 'kysely';

/** Marks a value in a query compiled once as the parameter `name` (see precompile). */
const PARAMETER = '\u0000rein-parameter:';

/**
 * A placeholder for parameter `name` in the query given to precompile. Typed `never`, which fits
 * any column: what a parameter takes is checked where the precompiled query is given its values.
 */
export function parameter(name: string): never {
  return `${PARAMETER}${name}` as never;
}

/**
 * A query built and compiled once, run with new values: Kysely builds and compiles each query
 * every time it runs, which on the journal's hot path (a call's begin and finish) costs more than
 * the statement itself. `query` is compiled with parameter(name) where values go; `with(values)`
 * gives the compiled query with each placeholder replaced by values[name].
 */
export function precompile<P extends object, R>(query: {
  compile(): CompiledQuery<R>;
}): (values: P) => CompiledQuery<R> {
  const compiled = query.compile();
  const slots = compiled.parameters.map((value) =>
    typeof value === 'string' && value.startsWith(PARAMETER) ? value.slice(PARAMETER.length) : undefined,
  );
  for (const name of slots) if (name === '') throw new Error('a precompiled query has a parameter without a name');
  return (values) => ({
    ...compiled,
    parameters: slots.map((name, i) =>
      name === undefined ? compiled.parameters[i] : (values as Record<string, unknown>)[name],
    ),
  });
}
