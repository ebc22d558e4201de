/** Calls to Rein's HTTP API with the admin key the login form kept in this tab's session (never in the URL). */

const KEY = 'rein.adminKey';

export const storedKey = () => sessionStorage.getItem(KEY);
export const saveKey = (key: string) => sessionStorage.setItem(KEY, key);
export const forgetKey = () => sessionStorage.removeItem(KEY);

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function get<T>(path: string, key = storedKey()): Promise<T> {
  const res = await fetch(path, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  const body = (await res.json().catch(() => ({}))) as { error?: { message?: string } };
  if (!res.ok) throw new ApiError(res.status, body.error?.message ?? `${path}: HTTP ${res.status}`);
  return body as T;
}

export const enc = encodeURIComponent;
