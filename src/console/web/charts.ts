import uPlot from 'uplot';
import { h } from './dom.js';
import { exportLinks } from './export.js';

export interface Series {
  label: string;
  values: Array<number | null>;
}

/** Distinct colours, in order of series. */
const COLOURS = ['#2f6fdf', '#137333', '#b3261e', '#a15c00', '#7b3fbf', '#0f7d8a', '#667085', '#c2185b'];

/** Where the browser test (and anyone in the devtools) finds a chart's plotted data: `element.uplot.data`. */
export type ChartElement = HTMLElement & { uplot?: uPlot };

/**
 * A line chart over iterations (or `x`: optimizer steps), its y axis labelled with `unit`. `band`: two series' indexes
 * (upper, lower) whose gap is shaded, e.g. the gate's interval. Points are drawn, since a run has
 * few iterations (up to 60 points). Without a single value to plot it says so (`none`: what that means for this
 * chart) instead of drawing empty axes.
 */
export function iterationChart(
  id: string,
  title: string,
  iterations: number[],
  series: Series[],
  options: { unit: string; band?: [number, number]; percent?: boolean; none?: string; x?: string },
): ChartElement {
  const x = options.x ?? 'iteration';
  const element: ChartElement = h('div', { class: 'chart', 'data-chart': id }, h('h3', {}, title));
  if (!series.some((s) => s.values.some((v) => v !== null))) {
    element.append(
      h(
        'p',
        { class: 'muted', 'data-empty': '' },
        iterations.length === 0 && options.x === undefined
          ? 'No data yet: no iteration has finished.'
          : (options.none ?? 'No data yet: no iteration has recorded it.'),
      ),
    );
    return element;
  }
  const format = (v: number | null) =>
    v === null
      ? '–'
      : options.percent
        ? `${(v * 100).toFixed(1)}%`
        : Number.isInteger(v)
          ? String(v)
          : v.toPrecision(4);
  const opts: uPlot.Options = {
    width: 420,
    height: 200,
    // A flat series (a loss of 0 throughout) gets a small range around it, not uPlot's 0..100.
    scales: {
      x: { time: false },
      y: options.percent
        ? { range: [0, 1] }
        : { range: (_u, min, max) => (min === max ? [min - 1, max + 1] : uPlot.rangeNum(min, max, 0.1, true)) },
    },
    // Ticks short enough for the axis (three significant digits); the legend shows the values whole.
    axes: [
      { label: x, values: (_u, ticks) => ticks.map((t) => (Number.isInteger(t) ? String(t) : '')) },
      {
        label: options.unit,
        values: (_u, ticks) =>
          ticks.map((t) => (options.percent ? `${Math.round(t * 100)}%` : String(Number(t.toPrecision(3))))),
        size: 64,
      },
    ],
    series: [
      { label: x },
      ...series.map((s, i) => {
        const inBand = options.band?.includes(i + 1);
        const colour = inBand ? '#9aa4b2' : (COLOURS[i % COLOURS.length] as string);
        return {
          label: s.label,
          stroke: colour,
          width: inBand ? 1 : 2,
          dash: inBand ? [4, 4] : undefined,
          points: { show: iterations.length <= 60, size: inBand ? 3 : 7 },
          spanGaps: true,
          value: (_u: uPlot, v: number | null) => format(v),
        };
      }),
    ],
    ...(options.band && { bands: [{ series: options.band, fill: 'rgba(47, 111, 223, 0.12)' }] }),
    legend: { show: true },
  };
  const data: uPlot.AlignedData = [iterations, ...series.map((s) => s.values)];
  element.uplot = new uPlot(opts, data, element);
  element.append(
    exportLinks(id, () => ({
      headings: [x, ...series.map((s) => s.label)],
      rows: iterations.map((x, i) => [x, ...series.map((s) => s.values[i] ?? null)]),
    })),
  );
  return element;
}
