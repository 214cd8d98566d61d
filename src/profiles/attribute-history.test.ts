import { beforeAll, describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  accountId,
  attr,
  create,
  EMAIL,
  emailProfile,
  expectNoContent,
  fresh,
  M,
  patchV2,
  profile,
  S,
  server,
  token,
  useProfileData,
  version,
  WEB,
} from '../../test/profile-data.ts';

/**
 * GET …/sections/{section}/attributes/history through real HTTP: each attribute's value now with
 * its set time, and the values it replaced, newest first, under the rules of the attributes GET
 * (ATTR-02, ATTR-03; hidden attributes and keyspace permissions as ATTR-04).
 */

useProfileData();

interface Entry {
  version_id: string;
  attribute_discriminator: string;
  current: { value: unknown; set_at: string } | null;
  past: { value: unknown; set_at: string; replaced_at: string }[];
  past_total: number;
}

const getAttributes = (ks: string, key: string) => server.request('GET', `${profile(ks, key)}/attributes`, { token });

const history = (ks: string, key: string, query = '', t = token, section = S) =>
  server.request('GET', `${profile(ks, key, section)}/attributes/history${query}`, { token: t });

async function historyOf(ks: string, key: string, query = ''): Promise<Map<string, Entry>> {
  const res = await history(ks, key, query);
  expect(res.status, res.text).toBe(200);
  return new Map((res.body.items as Entry[]).map((e) => [e.attribute_discriminator, e]));
}

const NICK = attr('nickname');

describe('GET attribute history', () => {
  it('answers the current value with its set time and the replaced values newest first (ATTR-02)', async () => {
    const key = await emailProfile('history');
    for (const nick of ['Ann', 'Annie', 'Anna']) {
      server.clock.advance(60_000);
      expectNoContent(await patchV2(EMAIL, key, { [NICK]: nick }));
    }
    const entry = (await historyOf(EMAIL, key)).get(NICK)!;
    expect(entry.version_id).toBe(version(NICK));
    expect(entry.current?.value).toBe('Anna');
    expect(entry.past.map((p) => p.value)).toEqual(['Annie', 'Ann']);
    expect(entry.past_total).toBe(2);
    // Each value was replaced when the next one was set.
    expect(entry.past[0].replaced_at).toBe(entry.current!.set_at);
    expect(entry.past[1].replaced_at).toBe(entry.past[0].set_at);
    expect(Date.parse(entry.past[0].set_at) - Date.parse(entry.past[1].set_at)).toBe(60_000);
    expect(entry.current!.set_at).toBe(new Date(server.clock.now).toISOString());
  });

  it('caps the past values at limit and counts them all; a cleared attribute has no current value', async () => {
    const key = await emailProfile('history');
    for (const n of [1, 2, 3, 4]) {
      server.clock.advance(1000);
      expectNoContent(await patchV2(EMAIL, key, { [attr('visits')]: n }));
    }
    server.clock.advance(1000);
    expectNoContent(await patchV2(EMAIL, key, { [attr('visits')]: null }));
    const entry = (await historyOf(EMAIL, key, '?limit=2')).get(attr('visits'))!;
    expect(entry.current).toBeNull();
    expect(entry.past.map((p) => p.value)).toEqual([4, 3]);
    expect(entry.past_total).toBe(4);
  });

  it('leaves out attributes the keyspace may not read, as the attributes GET (ATTR-04)', async () => {
    const key = await emailProfile('history');
    for (const value of ['mine', 'mine again']) {
      server.clock.advance(1000);
      expectNoContent(await patchV2(EMAIL, key, { [attr('email-only')]: value, [NICK]: value }));
    }
    expect((await historyOf(EMAIL, key)).get(attr('email-only'))?.past.map((p) => p.value)).toEqual(['mine']);
    // Through the web keyspace, which may not read "Email only", once the profile has a web key.
    const cookie = fresh('cookie');
    expectNoContent(
      await server.request('PUT', '/audience/profiles/merges', {
        token,
        body: {
          profiles: [
            { keyspace_discriminator: EMAIL, profile_key: key },
            { keyspace_discriminator: WEB, profile_key: cookie },
          ],
        },
      }),
    );
    const byWeb = await historyOf(WEB, cookie);
    expect(byWeb.has(attr('email-only'))).toBe(false);
    expect(byWeb.get(NICK)?.current?.value).toBe('mine again');
    expect(Object.keys((await getAttributes(WEB, cookie)).body)).not.toContain(version(attr('email-only')));
  });

  it('leaves out an attribute once it is hidden, values and history, as the attributes GET (ATTR-04)', async () => {
    const key = await emailProfile('history');
    for (const balance of [1.5, 2.5]) {
      server.clock.advance(1000);
      expectNoContent(await patchV2(EMAIL, key, { [attr('balance')]: balance }));
    }
    expect((await historyOf(EMAIL, key)).get(attr('balance'))?.past_total).toBe(1);
    const hidden = await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, {
      sections: [
        {
          name: 'Store',
          attributes: [{ name: 'Balance', hidden: true, versions: [{ type: ['Number with decimal'] }] }],
        },
      ],
    });
    expect(hidden.status, hidden.text).toBe(200);
    expect((await historyOf(EMAIL, key)).has(attr('balance'))).toBe(false);
    expect(Object.keys((await getAttributes(EMAIL, key)).body)).not.toContain(version(attr('balance')));
  });

  it('answers a merged profile its cluster’s history, as the attributes GET answers its cluster’s values', async () => {
    const canonical = await emailProfile('history');
    server.clock.advance(1000);
    expectNoContent(await patchV2(EMAIL, canonical, { [NICK]: 'Bo' }));
    // A profile of the web keyspace, created later, with a value it replaced.
    const member = fresh('cookie');
    await create(member, WEB);
    for (const nick of ['Bob', 'Bobby']) {
      server.clock.advance(1000);
      expectNoContent(await patchV2(WEB, member, { [NICK]: nick }));
    }
    expectNoContent(
      await server.request('PUT', '/audience/profiles/merges', {
        token,
        body: {
          profiles: [
            { keyspace_discriminator: EMAIL, profile_key: canonical },
            { keyspace_discriminator: WEB, profile_key: member },
          ],
        },
      }),
    );
    const fromMember = await history(WEB, member);
    expect(fromMember.status).toBe(200);
    // Through either key, the values now are those its attributes GET answers (the web keyspace's
    // readable ones through the web key), and the past values are the same.
    const fromCanonical = (await history(EMAIL, canonical)).body.items as Entry[];
    const current = (items: Entry[]) =>
      Object.fromEntries(items.filter((e) => e.current).map((e) => [e.version_id, e.current!.value]));
    expect(current(fromMember.body.items)).toEqual((await getAttributes(WEB, member)).body);
    expect(current(fromCanonical)).toEqual((await getAttributes(EMAIL, canonical)).body);
    for (const e of fromMember.body.items as Entry[])
      expect(e).toEqual(fromCanonical.find((c) => c.version_id === e.version_id));
    const entry = (fromMember.body.items as Entry[]).find((e) => e.attribute_discriminator === NICK)!;
    // The earliest-created member's value is shown; the member's replaced value is in the history.
    expect(entry.current?.value).toBe('Bo');
    expect(entry.past.map((p) => p.value)).toEqual(['Bob']);
  });

  it('refuses a key not granted the section with 403 AUD-1107, as the attributes GET', async () => {
    const key = await emailProfile('history');
    const magazineOnly = await server.token(await server.createKey(accountId, { section_discriminators: [M] }));
    expectProblem(await history(EMAIL, key, '', magazineOnly), 403, 'AUD-1107');
    expectProblem(
      await server.request('GET', `${profile(EMAIL, key)}/attributes`, { token: magazineOnly }),
      403,
      'AUD-1107',
    );
    expect((await history(EMAIL, key, '', magazineOnly, M)).status).toBe(200);
  });

  it('answers 404 AUD-1201 for an unknown profile and 404 for an unknown section (ATTR-03)', async () => {
    expectProblem(await history(EMAIL, fresh('nobody')), 404, 'AUD-1201');
    const key = await emailProfile('history');
    expectProblem(await history(EMAIL, key, '', token, `${S}-gone`), 404, 'AUD-1102');
  });

  it('refuses a limit out of range with a problem naming the field', async () => {
    const key = await emailProfile('history');
    for (const limit of ['0', '501', 'many']) {
      const detail = expectProblem(await history(EMAIL, key, `?limit=${limit}`), 400);
      expect(detail).toContain('limit');
    }
  });
});
