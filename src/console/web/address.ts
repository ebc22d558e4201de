/**
 * A page's own state in its address: filters and page after `?` in the hash (`#/runs?execution=RUNNING`), so a
 * view can be bookmarked and shared, and the key never travels in a URL.
 */

/** The parameters after `?` in the current address. */
export const addressParams = (): URLSearchParams => new URLSearchParams(location.hash.split('?')[1] ?? '');

/** `path` with the parameters that have a value (empty ones are left out). */
export function addressHref(path: string, params: Record<string, string> = {}): string {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== '')).toString();
  return `${path}${query ? `?${query}` : ''}`;
}

/** A filter form's Apply: goes to `path` with the form's values (trimmed; empty ones left out), its first page. */
export function applyGoesTo(form: HTMLElement, path: string): void {
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const values = [...new FormData(form as HTMLFormElement)].map(([k, v]) => [
      k,
      typeof v === 'string' ? v.trim() : '',
    ]);
    location.hash = addressHref(path, Object.fromEntries(values));
  });
}
