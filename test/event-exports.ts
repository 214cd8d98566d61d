import type pg from 'pg';
import { expect } from 'vitest';
import type { Manifest } from '../src/definitions/schemas.ts';
import type { TestServer } from './app.ts';
import { type Account, BLOG, exportHelpers, MANIFEST, NO_LIMITS, SHOP, V } from './exports.ts';

// What the tests of the event export share: its definitions, and its accounts and requests.

export const WRITER = `${V}.tags.user-created.writer`;
export const PAGE_VIEW = `${V}.events.user-created.page-view`;
export const PURCHASE = `${V}.events.user-created.purchase`;
export const HIDDEN_VISIT = `${V}.events.user-created.hidden-visit`;
export const COMMENT = `${V}.events.user-created.comment`;
export const POINTS = `${V}.segments.user-created.points`;
export const WEEK = 7 * 24 * 60 * 60 * 1000;

/** The event export's own limit lifted too, for the tests that are not about it. */
export const LIFTED = { ...NO_LIMITS, event_export_requests_per_minute: null };
const [shopSection, blogSection] = MANIFEST.sections!;

export const EVENTS_MANIFEST: Manifest = {
  ...MANIFEST,
  sections: [
    {
      ...shopSection,
      events: [
        { name: 'Page view', versions: [{ type: [{ name: 'url', type: 'Text' }] }] },
        {
          name: 'Purchase',
          versions: [
            { type: [{ name: 'amount', type: 'Number' }] },
            {
              type: [
                { name: 'amount', type: 'Number' },
                { name: 'currency', type: 'Text' },
              ],
            },
          ],
        },
        { name: 'Hidden visit', hidden: true, versions: [{ type: [{ name: 'url', type: 'Text' }] }] },
      ],
    },
    {
      ...blogSection,
      attributes: [{ name: 'Nickname', versions: [{ type: ['Text'] }] }],
      tags: [{ name: 'Writer' }],
      events: [{ name: 'Comment', versions: [{ type: [{ name: 'text', type: 'Text' }] }] }],
    },
  ],
  segments: [
    ...MANIFEST.segments!,
    {
      name: 'Points',
      section: SHOP,
      versions: [
        { query: `section({section}).attribute({attribute:${V}.attributes.user-created.points}).gt(100)` },
        { query: `section({section}).attribute({attribute:${V}.attributes.user-created.points}).gt(250)` },
      ],
    },
  ],
};

/** The event export's helpers over the test file's own server and database. */
export function eventExportHelpers(env: () => { server: TestServer; db: pg.Pool }) {
  const { account, ok } = exportHelpers(env);

  /** An account with the events manifest, and the ids its tests need: sections, versions of Blog's attribute and of each event, the Points segment's versions. */
  async function eventAccount(limits: Record<string, number | null> = LIFTED) {
    const a = await account(limits, EVENTS_MANIFEST);
    const get = async (path: string) => (await ok(env().server.request('GET', path, { token: a.token }), 200)).body;
    const sections = Object.fromEntries(
      (await get('/audience/sections')).items.map((s: { discriminator: string; id: string }) => [
        s.discriminator,
        s.id,
      ]),
    );
    const versions = (items: { discriminator: string; versions: { id: string }[] }[]) =>
      Object.fromEntries(items.map((i) => [i.discriminator, i.versions.map((v) => v.id)]));
    const events = {
      ...versions((await get(`/audience/sections/${SHOP}/events`)).items),
      ...versions((await get(`/audience/sections/${BLOG}/events`)).items),
    };
    // Lists leave hidden events out.
    const { rows } = await env().db.query(
      'select v.version_id::text as id from event_versions v join events e using (account_id, event_id) where e.account_id = $1::bigint and e.hidden',
      [a.accountId],
    );
    events[HIDDEN_VISIT] = [rows[0].id];
    const nickname = (await get(`/audience/sections/${BLOG}/attributes`)).items.find((x: { discriminator: string }) =>
      x.discriminator.endsWith('nickname'),
    ).versions[0].id as string;
    const points = (await get(`/audience/segments/${POINTS}`)).versions.map((v: { id: string }) => v.id) as string[];
    return { ...a, sections: sections as Record<string, string>, events, nickname, pointsSegment: points };
  }

  async function requestEventExport(a: Account, body: unknown): Promise<string> {
    const res = await ok(env().server.request('POST', '/audience/profiles/exports', { token: a.token, body }), 201);
    expect(Object.keys(res.body)).toEqual(['file_download_url']);
    expect(res.body.file_download_url).toMatch(/\/audience\/profiles\/reports\/[0-9a-f-]{36}$/);
    return res.body.file_download_url;
  }

  return { eventAccount, requestEventExport };
}

/** An account of eventAccount: its ids. */
export type EventAccount = Awaited<ReturnType<ReturnType<typeof eventExportHelpers>['eventAccount']>>;
