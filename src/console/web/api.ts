/** Calls to Rein's HTTP API with the admin key the login form kept in this tab's session (never in the URL). */

const KEY = 'rein.adminKey';

export const storedKey = () => sessionStorage.getItem(KEY);
export const saveKey = (key: string) => sessionStorage.setItem(KEY, key);
export const forgetKey = () => sessionStorage.removeItem(KEY);

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Rein's error code (`promotion_refused`, `run_not_found`…), when the API gave one. */
    readonly code?: string,
  ) {
    super(message);
  }
}

export async function get<T>(path: string, key = storedKey()): Promise<T> {
  return answer<T>(path, await fetch(path, { headers: key ? { authorization: `Bearer ${key}` } : {} }));
}

/** An action: the same route (and so the same rules and audit) as the CLI's and any other client's. */
export async function post<T>(path: string, body?: unknown): Promise<T> {
  const key = storedKey();
  const res = await fetch(path, {
    method: 'POST',
    headers: {
      ...(key && { authorization: `Bearer ${key}` }),
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return answer<T>(path, res);
}

async function answer<T>(path: string, res: Response): Promise<T> {
  const body = (await res.json().catch(() => ({}))) as { error?: { message?: string; code?: string } };
  if (!res.ok) throw new ApiError(res.status, body.error?.message ?? `${path}: HTTP ${res.status}`, body.error?.code);
  return body as T;
}

export const enc = encodeURIComponent;
