/** What a page gets: where to render, and a way to learn it was left (to stop polling). */
export interface PageContext {
  root: HTMLElement;
  left(): boolean;
}

/** A page of the console: renders into its context, given the parameters its route captured. */
export type Page = (context: PageContext, ...params: string[]) => Promise<void>;
