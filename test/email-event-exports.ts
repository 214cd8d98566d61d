import zlib from 'node:zlib';
import { parse as parseCsv } from 'csv-parse/sync';
import type pg from 'pg';
import { expect } from 'vitest';
import { readWhen, STATE_BOUND_MS } from './until.ts';
import type { Manifest } from '../src/definitions/schemas.ts';
import type { TestServer } from './app.ts';
import { type Account, EMAIL, exportHelpers, MANIFEST, NO_LIMITS } from './exports.ts';

// What the tests of the email event export share: its definitions, its activities and events,
// its requests, status calls and downloads.

export const LIFTED = { ...NO_LIMITS, event_export_requests_per_minute: null };
export const EMAIL_EVENTS_MANIFEST: Manifest = {
  ...MANIFEST,
  sections: [
    MANIFEST.sections![0],
    {
      ...MANIFEST.sections![1],
      attributes: [{ name: 'Nickname', versions: [{ type: ['Text'] }] }],
      tags: [{ name: 'Writer' }],
    },
  ],
};

/** The email event export's helpers over the test file's own server and database. */
export function emailEventHelpers(env: () => { server: TestServer; db: pg.Pool }) {
  const { ok, rawGet } = exportHelpers(env);

  async function activity(a: Account, id: string, body: Record<string, unknown>): Promise<void> {
    await ok(
      env().server.admin('PUT', `/admin/accounts/${a.accountId}/activities/${id}`, {
        kind: 'email',
        status: 'sent',
        ...body,
      }),
      201,
    );
  }

  /** Ingests events through the operator's endpoint (keyed by email); answers the server time they were received at. */
  async function ingest(a: Account, items: Record<string, unknown>[]): Promise<string> {
    const res = await ok(
      env().server.admin('POST', `/admin/accounts/${a.accountId}/activity-events`, {
        items: items.map((i) => ({ keyspace_discriminator: EMAIL, ...i })),
      }),
      200,
    );
    expect(res.body.recorded, res.text).toBe(items.length);
    return String(env().server.clock.now);
  }

  async function requestReport(a: Account, body: unknown): Promise<string> {
    const res = await ok(env().server.request('POST', '/emails/reports', { token: a.token, body }), 201);
    expect(Object.keys(res.body)).toEqual(['report_id']);
    expect(typeof res.body.report_id).toBe('string');
    return res.body.report_id;
  }

  /** Status calls until the report is no longer `requested`. */
  function settled(a: Account, id: string, query = ''): Promise<{ body: any; headers: Headers }> {
    return readWhen(
      `report ${id} settled`,
      () => ok(env().server.request('GET', `/emails/reports/${id}${query}`, { token: a.token }), 200),
      (res) => res.body.result.status !== 'requested',
      STATE_BOUND_MS,
    );
  }

  /** The path and query of a download URL. */
  const local = (url: string) => {
    const u = new URL(url);
    return u.pathname + u.search;
  };

  /** Downloads a file: its bytes must be gzip; answers header and rows of the CSV inside. */
  async function fetchFile(
    url: string,
    headers: Record<string, string> = {},
  ): Promise<{ header: string[]; rows: string[][] }> {
    const res = await rawGet(local(url), headers);
    expect(res.status, res.body.toString()).toBe(200);
    expect(res.headers['content-type']).toBe('application/gzip');
    expect(res.headers['content-encoding']).toBeUndefined();
    const [header, ...rows] = parseCsv(zlib.gunzipSync(res.body), { relax_column_count: false }) as string[][];
    return { header, rows };
  }

  return { activity, ingest, requestReport, settled, local, fetchFile };
}
