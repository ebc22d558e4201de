/**
 * A schedule request Rein refuses (a bad interval, an unknown or existing schedule): the user's to fix. Apart from
 * schedules.ts so the CLI can tell it without loading the Temporal client.
 */
export class ScheduleError extends Error {}
