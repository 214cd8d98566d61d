import { describe, expect, it, vi } from 'vitest';
import { expectProblem, TestServer } from '../../test/app.ts';
import {
  accountId,
  attr,
  create,
  CRM,
  EMAIL,
  expectNoContent,
  fresh,
  M,
  patchV2,
  S,
  server,
  token,
  useProfileData,
} from '../../test/profile-data.ts';

/**
 * The console's browsing of a section's profiles through real HTTP: the list, most recently
 * updated first, a page at a time, searched by a key's beginning and an attribute's value, and
 * the profiles per day.
 */

useProfileData();

const list = (query = '', section = S, as = token) =>
  server.request('GET', `/audience/sections/${section}/profiles${query}`, { token: as });

/** Every page of a list, following its cursor. */
async function allPages(
  query: string,
): Promise<{ keys: { profile_key: string }[]; attributes: Record<string, unknown> }[]> {
  const items = [];
  let cursor: string | null = null;
  do {
    const res = await list(`?limit=2${query}${cursor ? `&cursor=${cursor}` : ''}`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.items.length).toBeLessThanOrEqual(2);
    items.push(...res.body.items);
    cursor = res.body.next_cursor;
  } while (cursor);
  return items;
}

const emailOf = (item: { keys: { keyspace_discriminator?: string; profile_key: string }[] }) =>
  item.keys.find((k) => k.keyspace_discriminator === EMAIL)?.profile_key;

describe('GET /audience/sections/{s}/profiles', () => {
  it('lists the profiles most recently updated first, in pages, with their keys and values by name', async () => {
    const prefix = `browse-${Date.now()}`;
    const keys = [];
    for (let i = 0; i < 5; i++) {
      const key = `${prefix}-${i}@example.com`;
      await create(key);
      expectNoContent(await patchV2(EMAIL, key, { [attr('nickname')]: `nick ${i}`, [attr('visits')]: i }));
      keys.push(key);
    }
    // The first one written again is now the most recently updated.
    expectNoContent(await patchV2(EMAIL, keys[0], { [attr('visits')]: 10 }));
    const found = await allPages(`&keyspace=${EMAIL}&key_prefix=${prefix}`);
    expect(found.map(emailOf)).toEqual([keys[0], keys[4], keys[3], keys[2], keys[1]]);
    expect(found[0].attributes).toMatchObject({ [attr('nickname')]: 'nick 0', [attr('visits')]: 10 });
    // Every profile has its export key, last.
    for (const item of found) expect(item.keys.at(-1)!.profile_key).toMatch(/^[a-zA-Z0-9-]+$/);

    // The whole list holds them in the same order, among the others.
    const whole = (await allPages('')).map(emailOf).filter((k) => k?.startsWith(prefix));
    expect(whole).toEqual(found.map(emailOf));
  });

  it('finds profiles by an attribute value, read as the attribute type', async () => {
    const a = fresh('by-value');
    const b = fresh('by-value');
    await create(a);
    await create(b);
    const level = `level-${Date.now()}`;
    expectNoContent(
      await patchV2(EMAIL, a, { [attr('nickname')]: level, [attr('visits')]: 7777, [attr('subscribed')]: true }),
    );
    expectNoContent(await patchV2(EMAIL, b, { [attr('nickname')]: level, [attr('visits')]: 8888 }));
    const byText = await list(`?attribute=${attr('nickname')}&value=${level}`);
    expect(byText.body.items.map(emailOf).sort()).toEqual([a, b].sort());
    const byNumber = await list(`?attribute=${attr('visits')}&value=7777`);
    expect(byNumber.body.items.map(emailOf)).toEqual([a]);
    const both = await list(`?attribute=${attr('visits')}&value=8888&keyspace=${EMAIL}&key_prefix=${b.slice(0, -4)}`);
    expect(both.body.items.map(emailOf)).toEqual([b]);
    const byBoolean = await list(`?attribute=${attr('subscribed')}&value=true&keyspace=${EMAIL}&key_prefix=${a}`);
    expect(byBoolean.body.items.map(emailOf)).toEqual([a]);
  });

  it('finds a merged profile by a key of any profile of its cluster, once', async () => {
    const email = fresh('merged');
    const crm = `crm-${Date.now()}`;
    await create(email);
    await create(crm, CRM);
    const merge = await server.request('PUT', '/audience/profiles/merges', {
      token,
      body: {
        profiles: [
          { keyspace_discriminator: EMAIL, profile_key: email },
          { keyspace_discriminator: CRM, profile_key: crm },
        ],
      },
    });
    expect(merge.status, merge.text).toBe(204);
    const found = await list(`?keyspace=${CRM}&key_prefix=${crm}`);
    expect(found.body.items).toHaveLength(1);
    expect(found.body.items[0].keys).toEqual(
      expect.arrayContaining([
        { keyspace_discriminator: EMAIL, profile_key: email },
        { keyspace_discriminator: CRM, profile_key: crm },
      ]),
    );
  });

  it('leaves hidden attributes out and refuses to search them', async () => {
    const key = fresh('hidden');
    await create(key);
    const res = await list(`?keyspace=${EMAIL}&key_prefix=${key}`);
    expect(Object.keys(res.body.items[0].attributes)).not.toContain(attr('secret'));
    expect(expectProblem(await list(`?attribute=${attr('secret')}&value=x`), 400, 'AUD-0')).toContain('"attribute"');
  });

  it('refuses bad input with a problem naming the field', async () => {
    const cases: [string, number, string, string][] = [
      ['?limit=0', 400, 'AUD-0', 'limit'],
      ['?limit=201', 400, 'AUD-0', 'limit'],
      ['?cursor=bm90LWEtY3Vyc29y', 400, 'AUD-0', 'cursor'],
      [`?key_prefix=x`, 400, 'AUD-1003', 'keyspace'],
      [`?keyspace=nope&key_prefix=x`, 400, 'AUD-0', 'keyspace'],
      [`?attribute=${attr('nope')}&value=1`, 400, 'AUD-0', 'attribute'],
      [`?attribute=${attr('visits')}`, 400, 'AUD-1003', 'value'],
      [`?attribute=${attr('visits')}&value=many`, 400, 'AUD-0', 'value'],
      [`?attribute=${attr('subscribed')}&value=yes`, 400, 'AUD-0', 'value'],
      [`?attribute=${attr('address')}&value=x`, 400, 'AUD-0', 'attribute'],
      ['?value=x', 400, 'AUD-0', 'value'],
      ['?colour=red', 400, 'AUD-0', 'colour'],
    ];
    for (const [query, status, code, field] of cases)
      expect(expectProblem(await list(query), status, code), query).toContain(`"${field}"`);
    expectProblem(await list('', 'com.vendor1.sections.nope'), 404, 'AUD-1102');
  });

  it('shows a key restricted to sections only those sections', async () => {
    const key = fresh('restricted');
    await create(key);
    const magazineOnly = await server.token(await server.createKey(accountId, { section_discriminators: [M] }));
    expectProblem(await list('', S, magazineOnly), 403, 'AUD-1107');
    expectProblem(
      await server.request('GET', `/audience/sections/${S}/profiles/growth`, { token: magazineOnly }),
      403,
      'AUD-1107',
    );
    expect((await list('', M, magazineOnly)).status).toBe(200);
  });

  it('never writes a searched key or value to the log', async () => {
    const lines: string[] = [];
    const logged = await TestServer.start({ LOG_LEVEL: 'info' }, { log: { write: (line) => lines.push(line) } });
    try {
      const secret = `private-${Date.now()}`;
      const res = await logged.request(
        'GET',
        `/audience/sections/${S}/profiles?keyspace=${EMAIL}&key_prefix=${secret}&attribute=${attr('nickname')}&value=${secret}`,
        { token },
      );
      expect(res.status, res.text).toBe(200);
      // Request lines are written in batches: the request's line is awaited, then read.
      await vi.waitFor(() => expect(lines.join('')).toContain('/profiles?'));
      expect(lines.join('')).not.toContain(secret);
    } finally {
      await logged.close();
    }
  });
});

describe('GET /audience/sections/{s}/profiles/growth', () => {
  it("counts the section's profiles created each day and all of them at each day's end", async () => {
    const before = await server.request('GET', `/audience/sections/${M}/profiles/growth?days=3`, { token });
    expect(before.status, before.text).toBe(200);
    expect(before.body.items).toHaveLength(3);
    const start = before.body.items[2].total_profiles;
    // Two profiles created today with data in the magazine section, one yesterday (the clock moved back).
    for (const back of [0, 0, 1]) {
      server.clock.now = Date.now() - back * 86_400_000;
      const key = fresh('growth');
      await create(key, EMAIL, M);
      expectNoContent(await patchV2(EMAIL, key, { [attr('issue')]: 1 }, '', M));
    }
    server.clock.now = Date.now();
    const res = await server.request('GET', `/audience/sections/${M}/profiles/growth?days=3`, { token });
    const [, yesterday, today] = res.body.items;
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    expect(today.day).toBe(day(Date.now()));
    expect(yesterday.day).toBe(day(Date.now() - 86_400_000));
    expect(today.new_profiles).toBe(before.body.items[2].new_profiles + 2);
    expect(yesterday.new_profiles).toBe(before.body.items[1].new_profiles + 1);
    expect(today.total_profiles).toBe(start + 3);
    expect(today.total_profiles - yesterday.total_profiles).toBe(today.new_profiles);
    // A profile without data in the section is not one of its profiles.
    await create(fresh('elsewhere'));
    const again = await server.request('GET', `/audience/sections/${M}/profiles/growth?days=3`, { token });
    expect(again.body.items[2].total_profiles).toBe(start + 3);
  });

  it('refuses a number of days out of range, naming it', async () => {
    for (const days of ['0', '367', 'x'])
      expect(
        expectProblem(
          await server.request('GET', `/audience/sections/${S}/profiles/growth?days=${days}`, { token }),
          400,
        ),
      ).toContain('"days"');
  });
});
