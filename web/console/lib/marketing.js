// What the marketer's pages (segments, imports and exports, activities, transactional mail) share:
// files downloaded with the session's token, charts, and polling.
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { api, ApiError, foreignAnswer, parseJson, request, send } from './api.js';
import { html } from './html.js';
import { session } from './session.js';

/** Calls `tick` every `ms` while `active`. */
export function useEvery(ms, active, tick) {
  const latest = useRef(tick);
  latest.current = tick;
  useEffect(() => {
    if (!active) return;
    const timer = setInterval(() => latest.current(), ms);
    return () => clearInterval(timer);
  }, [ms, active]);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The interface's count by consent of `body` (POST /audience/profiles/reports/consents/count, a
 * job), polled until ready: { result } with total_profile_count and a count per channel field
 * name, { error }, or {} while counting or without a body. Counts are limited per second: one
 * refused is asked again a second later. Counted again when the body changes, and on reload().
 */
export function useConsentCount(body) {
  const [state, setState] = useState(/** @type {{ error?: any, result?: any }} */ ({}));
  const [round, setRound] = useState(0);
  const asked = body ? JSON.stringify(body) : '';
  useEffect(() => {
    setState({});
    if (!asked) return;
    let live = true;
    (async () => {
      let created;
      for (;;) {
        try {
          created = await api('POST', '/audience/profiles/reports/consents/count', { body: JSON.parse(asked) });
          break;
        } catch (error) {
          if (error.status !== 429) throw error;
          await sleep(1000);
        }
      }
      const poll = new URL(created.poll_url).pathname.replace('/audience/', '/v2/audience/');
      while (live) {
        const result = await send('GET', poll);
        if (result && typeof result.total_profile_count === 'number') return result;
        await sleep(300);
      }
    })().then(
      (result) => live && result && setState({ result }),
      (error) => live && setState({ error }),
    );
    return () => {
      live = false;
    };
  }, [asked, round]);
  return { ...state, reload: () => setRound((r) => r + 1) };
}

/**
 * Downloads a file of the service as `name`: fetched with the session's token (the file is never
 * in an address a browser would keep), then saved through a link to the blob. `bearer` false for
 * a URL that carries its own credential.
 */
export async function download(url, name, { bearer = true } = {}) {
  const headers = bearer ? { authorization: `Bearer ${session().token}` } : {};
  const res = await request(url, { headers, credentials: 'omit', cache: 'no-store' });
  if (!res.ok) {
    const problem = parseJson(res, await res.text());
    throw problem ? new ApiError(res.status, problem) : foreignAnswer(res);
  }
  const href = URL.createObjectURL(await res.blob());
  const link = document.createElement('a');
  link.href = href;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(href), 10_000);
}

let chartStyle;
/** uPlot's style sheet, linked once (style-src 'self' allows it). */
function linkChartStyle() {
  if (chartStyle) return;
  chartStyle = document.createElement('link');
  chartStyle.rel = 'stylesheet';
  chartStyle.href = '/console/vendor/uplot.css';
  document.head.append(chartStyle);
}

const COLOURS = ['#1f5fae', '#1a7f37', '#8250df', '#bf5700', '#cf222e', '#57606a', '#0a7ea4'];

/**
 * A line chart of series over time: `times` (ISO date-times) and `series` ({ label, values }).
 * Its figures are also given as a table for screen readers and keyboard users.
 */
export function Chart({ title, times, series, unit = 'profiles' }) {
  const box = useRef(null);
  useEffect(() => {
    linkChartStyle();
    const width = Math.max(280, Math.min(900, box.current.clientWidth || 600));
    const plot = new uPlot(
      {
        title,
        width,
        height: 260,
        series: [
          { label: 'Time' },
          ...series.map((s, i) => ({ label: s.label, stroke: COLOURS[i % COLOURS.length], width: 2 })),
        ],
        // Counts are whole: ticks at whole steps, from 0, the axis labelled with what is counted.
        axes: [
          {},
          {
            size: 60,
            label: unit,
            incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 1e7],
            values: (u, ticks) => ticks.map((v) => (Number.isInteger(v) ? v.toLocaleString('en') : '')),
          },
        ],
        scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
        // The legend names the series; the values at the cursor replace "--" only while pointing.
        legend: { live: false },
      },
      [times.map((t) => Date.parse(t) / 1000), ...series.map((s) => s.values)],
      box.current,
    );
    return () => plot.destroy();
  }, [title, JSON.stringify(times), JSON.stringify(series)]);
  return html`<figure class="chart">
    <div ref=${box} class="chart-box" aria-hidden="true"></div>
    <details>
      <summary>${title}: the figures</summary>
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Time</th>
              ${series.map((s) => html`<th scope="col">${s.label}</th>`)}
            </tr>
          </thead>
          <tbody>
            ${times.map(
              (t, i) =>
                html`<tr>
                  <td>${new Date(t).toLocaleString()}</td>
                  ${series.map((s) => html`<td>${String(s.values[i])}</td>`)}
                </tr>`,
            )}
          </tbody>
        </table>
      </div>
    </details>
  </figure>`;
}
