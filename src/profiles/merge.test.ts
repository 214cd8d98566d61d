import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  A_CRM,
  UNLIMITED,
  A_EMAIL,
  A_FIRST,
  A_LAST,
  CLUB_S,
  CRM,
  EMAIL,
  MOBILE,
  SHOP_S,
  TWO,
  TX,
  VIP,
  WEB,
  addPageView,
  attrs,
  create,
  events,
  expectNoContent,
  exportKeyOf,
  getSection,
  id,
  lock,
  mail,
  merge,
  patchTags,
  patchV1,
  patchV2,
  server,
  tags,
  token,
  uid,
  unmerge,
  useProfileLifecycle,
} from '../../test/profile-lifecycle.ts';

/**
 * PUT /audience/profiles/merges through real HTTP, with its algebra generated (MRG-01..12, COMP-13,
 * COMP-15, COMP-16).
 */

useProfileLifecycle();

// ---- MRG: merge ----

describe('profiles: merge', () => {
  it('MRG-01 PUT /audience/profiles/merges with two profiles → 204 with an empty body', async () => {
    const a = mail('m01');
    const b = uid('cookie');
    expect((await create(EMAIL, a)).status).toBe(201);
    expect((await create(WEB, b)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, a), id(WEB, b)));
    // Merging members of one cluster again changes nothing.
    expectNoContent(await merge(id(WEB, b), id(EMAIL, a)));
    expect(await attrs(WEB, b)).toEqual({ [A_EMAIL]: a });
  });

  it('MRG-02 profiles without exactly two entries → 400', async () => {
    const one = [id(EMAIL, mail())];
    const three = [id(EMAIL, mail()), id(WEB, uid()), id(CRM, uid())];
    for (const profiles of [[], one, three]) {
      expectProblem(
        await server.request('PUT', '/audience/profiles/merges', { token, body: { profiles } }),
        400,
        'AUD-1214',
      );
    }
    expectProblem(await server.request('PUT', '/audience/profiles/merges', { token, body: {} }), 400);
    expectProblem(await server.request('PUT', '/audience/profiles/merges', { token, body: { profiles: 'x' } }), 400);
    // None of the named profiles was created.
    for (const p of three)
      expectProblem(await getSection(p.keyspace_discriminator, p.profile_key, 'tags'), 404, 'AUD-1201');
  });

  it('MRG-03 an invalid profile_key → 400, and nothing is created', async () => {
    const cookie = uid('cookie');
    expectProblem(await merge(id(WEB, cookie), id(EMAIL, 'not-an-email')), 400, 'AUD-1205');
    expectProblem(await merge(id(MOBILE, '123'), id(WEB, cookie)), 400, 'AUD-1205');
    expectProblem(await merge(id(WEB, cookie), id(WEB, '')), 400, 'AUD-1205');
    expectProblem(
      await server.request('PUT', '/audience/profiles/merges', {
        token,
        body: { profiles: [id(WEB, cookie), { keyspace_discriminator: WEB, profile_key: 7 }] },
      }),
      400,
    );
    expectProblem(
      await server.request('PUT', '/audience/profiles/merges', {
        token,
        body: { profiles: [id(WEB, cookie), { keyspace_discriminator: WEB }] },
      }),
      400,
    );
    expectProblem(await getSection(WEB, cookie, 'tags'), 404, 'AUD-1201');
  });

  it('MRG-04 profiles named in a merge that do not exist are created', async () => {
    const a = mail('m04');
    const b = uid('cookie');
    expectNoContent(await merge(id(EMAIL, ` ${a.toUpperCase()}`), id(WEB, b)));
    expect(await attrs(EMAIL, a)).toEqual({});
    expect(await attrs(WEB, b)).toEqual({});
    expectProblem(await create(EMAIL, a), 409, 'AUD-1204');
    expectProblem(await create(WEB, b), 409, 'AUD-1204');
    // Each got its own export key.
    expect(await exportKeyOf(EMAIL, a)).not.toBe(await exportKeyOf(WEB, b));
  });

  it('MRG-05 after a merge both keys read and write the same data', async () => {
    const a = mail('m05');
    const b = uid('crm');
    expect((await create(EMAIL, a)).status).toBe(201);
    expect((await create(CRM, b, CLUB_S)).status).toBe(201);
    expect((await patchV2(CRM, b, { [A_LAST]: 'Crm' })).status).toBe(204);
    expect((await addPageView(CRM, b, 'before merge')).status).toBe(204);
    expectNoContent(await merge(id(EMAIL, a), id(CRM, b)));
    expect((await patchV2(EMAIL, a, { [A_FIRST]: 'Both' })).status).toBe(204);
    expect((await patchTags(CRM, b, { [VIP]: true })).status).toBe(204);
    expect((await addPageView(EMAIL, a, 'after merge')).status).toBe(204);
    for (const s of [SHOP_S, CLUB_S]) expect(await attrs(EMAIL, a, s)).toEqual(await attrs(CRM, b, s));
    expect(await attrs(CRM, b)).toEqual({ [A_EMAIL]: a, [A_FIRST]: 'Both', [A_LAST]: 'Crm' });
    expect(await attrs(EMAIL, a, CLUB_S)).toEqual({ [A_CRM]: b });
    expect(await tags(EMAIL, a)).toEqual({ [VIP]: true });
    expect(await tags(CRM, b)).toEqual({ [VIP]: true });
    const titles = (await events(EMAIL, a)).map((e) => e.data.title).sort();
    expect(titles).toEqual(['after merge', 'before merge']);
    expect((await events(CRM, b)).map((e) => e.data.title).sort()).toEqual(titles);
  });

  it('MRG-07 any two profiles merge, whatever their data says about the person', async () => {
    const a = uid('crm');
    const b = uid('cookie');
    expect((await create(CRM, a, CLUB_S)).status).toBe(201);
    expect((await create(WEB, b)).status).toBe(201);
    expect((await patchV2(CRM, a, { [A_FIRST]: 'Alice', [A_LAST]: 'Smith' })).status).toBe(204);
    expect((await patchV2(WEB, b, { [A_FIRST]: 'Bob', [A_LAST]: 'Jones' })).status).toBe(204);
    expectNoContent(await merge(id(CRM, a), id(WEB, b)));
    expect(await attrs(WEB, b)).toEqual(await attrs(CRM, a));
  });

  it('MRG-08 conflicting email, mobile or CRM ID values → 409 AUD-1215 and nothing is merged', async () => {
    for (const [ks, key1, key2] of [
      [EMAIL, mail('m08a'), mail('m08b')],
      [MOBILE, '+4741230081', '+4741230082'],
      [CRM, uid('crm'), uid('crm')],
    ]) {
      expect((await create(ks, key1)).status).toBe(201);
      expect((await create(ks, key2)).status).toBe(201);
      expect((await patchV2(ks, key1, { [A_FIRST]: 'One' })).status).toBe(204);
      expect((await patchV2(ks, key2, { [A_FIRST]: 'Two' })).status).toBe(204);
      const fresh = uid('cookie');
      // Through a new cookie that joins key1 first: its cluster conflicts with key2.
      expectNoContent(await merge(id(ks, key1), id(WEB, fresh)));
      expectProblem(await merge(id(ks, key2), id(ks, key1)), 409, 'AUD-1215');
      expectProblem(await merge(id(WEB, fresh), id(ks, key2)), 409, 'AUD-1215');
      expect((await attrs(ks, key1))[A_FIRST]).toBe('One');
      expect((await attrs(ks, key2))[A_FIRST]).toBe('Two');
      expect((await patchV2(ks, key2, { [A_LAST]: 'Separate' })).status).toBe(204);
      expect((await attrs(ks, key1))[A_LAST]).toBeUndefined();
      expect((await attrs(WEB, fresh))[A_FIRST]).toBe('One');
      // A profile created by the refused merge is rolled back too.
      const other = uid('cookie');
      expectNoContent(await merge(id(ks, key2), id(WEB, other)));
      expectProblem(await merge(id(WEB, other), id(WEB, fresh)), 409, 'AUD-1215');
    }
    // Equal values do not conflict.
    const same = mail('m08same');
    expect((await create(EMAIL, same)).status).toBe(201);
    const crm = uid('crm');
    expect((await patchV1(CRM, crm, { [A_EMAIL]: same })).status).toBe(204);
    expectNoContent(await merge(id(CRM, crm), id(EMAIL, same)));
  });

  it('MRG-09 a merge beyond the merge limit → 409 AUD-1216; the cluster stays as it was', async () => {
    const limited = await server.login(TWO, { ...UNLIMITED, merges_per_profile: 3 });
    const t = limited.token;
    const [a, b, c, d] = [uid('a'), uid('b'), uid('c'), uid('d')];
    expectNoContent(await merge(id(WEB, a), id(WEB, b), t));
    expectNoContent(await merge(id(WEB, c), id(WEB, a), t));
    // Already in the cluster: no growth, no error.
    expectNoContent(await merge(id(WEB, b), id(WEB, c), t));
    expectProblem(await merge(id(WEB, d), id(WEB, b), t), 409, 'AUD-1216');
    expectProblem(await getSection(WEB, d, 'tags', SHOP_S, t), 404, 'AUD-1201');
    expect((await create(WEB, d, SHOP_S, t)).status).toBe(201);
    expectProblem(await merge(id(WEB, a), id(WEB, d), t), 409, 'AUD-1216');
    expect((await patchV2(WEB, d, { [A_FIRST]: 'Alone' }, SHOP_S, t)).status).toBe(204);
    expect(await attrs(WEB, a, SHOP_S, t)).toEqual({});

    // Two clusters of two make four: refused as well.
    const [e, f, g, h] = [uid('e'), uid('f'), uid('g'), uid('h')];
    expectNoContent(await merge(id(WEB, e), id(WEB, f), t));
    expectNoContent(await merge(id(WEB, g), id(WEB, h), t));
    expectProblem(await merge(id(WEB, f), id(WEB, h), t), 409, 'AUD-1216');
    expect((await patchV2(WEB, e, { [A_FIRST]: 'EF' }, SHOP_S, t)).status).toBe(204);
    expect(await attrs(WEB, h, SHOP_S, t)).toEqual({});
  });

  it('MRG-10 a cluster with a transactional-email profile is held to the same limit', async () => {
    const limited = await server.login(TWO, { ...UNLIMITED, merges_per_profile: 3 });
    const t = limited.token;
    const [a, b] = [uid('a'), uid('b')];
    const tx = mail('tx');
    expectNoContent(await merge(id(WEB, a), id(TX, tx), t));
    expectNoContent(await merge(id(WEB, b), id(TX, tx), t));
    expectProblem(await merge(id(TX, tx), id(WEB, uid('c')), t), 409, 'AUD-1216');
  });

  it('MRG-11 merging a locked profile with an unlocked one succeeds and leaves both locked', async () => {
    const lockedKey = mail('m11');
    const open = uid('crm');
    expect((await create(EMAIL, lockedKey)).status).toBe(201);
    expectNoContent(await lock(EMAIL, lockedKey));
    expect((await create(CRM, open)).status).toBe(201);
    expect((await patchV2(CRM, open, { [A_FIRST]: 'Open' })).status).toBe(204);
    expectNoContent(await merge(id(CRM, open), id(EMAIL, lockedKey)));
    expectProblem(await getSection(CRM, open), 410, 'AUD-1202');
    expectProblem(await getSection(EMAIL, lockedKey), 410, 'AUD-1202');
    expectProblem(await create(CRM, open), 410, 'AUD-1202');
    // A key named in the merge that did not exist is locked as well.
    const fresh = uid('cookie');
    expectNoContent(await merge(id(EMAIL, lockedKey), id(WEB, fresh)));
    expectProblem(await create(WEB, fresh), 410, 'AUD-1202');
  });

  it('MRG-12 the canonical profile is the earliest created, whatever the argument order', async () => {
    for (const order of ['older first', 'newer first']) {
      const older = uid('older');
      const newer = uid('newer');
      expect((await create(WEB, older)).status).toBe(201);
      expect((await create(WEB, newer)).status).toBe(201);
      expect((await patchV2(WEB, older, { [A_FIRST]: 'Older' })).status).toBe(204);
      expect((await patchV2(WEB, newer, { [A_FIRST]: 'Newer', [A_LAST]: 'Newer' })).status).toBe(204);
      const pair = [id(WEB, older), id(WEB, newer)];
      if (order === 'newer first') pair.reverse();
      expectNoContent(await merge(pair[0], pair[1]));
      // The earliest-created member's values win, others fill the gaps.
      expect(await attrs(WEB, newer)).toEqual({ [A_FIRST]: 'Older', [A_LAST]: 'Newer' });
      expectProblem(await unmerge(WEB, older), 400, 'AUD-1217');
      expectNoContent(await unmerge(WEB, newer));
    }
  });

  it('COMP-13 a form-urlencoded merge with bracket keys works like JSON', async () => {
    const a = mail('c13');
    const b = uid('cookie');
    expect((await create(EMAIL, a)).status).toBe(201);
    const form = new URLSearchParams({
      'profiles[0][keyspace_discriminator]': EMAIL,
      'profiles[0][profile_key]': a,
      'profiles[1][keyspace_discriminator]': WEB,
      'profiles[1][profile_key]': b,
    }).toString();
    expect(form).toContain('%5B0%5D');
    const headers = { 'content-type': 'application/x-www-form-urlencoded' };
    expectNoContent(await server.request('PUT', '/audience/profiles/merges', { token, raw: form, headers }));
    expect(await attrs(WEB, b)).toEqual({ [A_EMAIL]: a });
    // Unencoded brackets too, and the same validation as JSON.
    const raw = `profiles[0][keyspace_discriminator]=${WEB}&profiles[0][profile_key]=${uid('x')}&profiles[1][keyspace_discriminator]=${WEB}&profiles[1][profile_key]=${b}`;
    expectNoContent(await server.request('PUT', '/audience/profiles/merges', { token, raw, headers }));
    const single = `profiles[0][keyspace_discriminator]=${WEB}&profiles[0][profile_key]=${b}`;
    expectProblem(
      await server.request('PUT', '/audience/profiles/merges', { token, raw: single, headers }),
      400,
      'AUD-1214',
    );
    const invalid = `profiles[0][keyspace_discriminator]=${EMAIL}&profiles[0][profile_key]=nope&profiles[1][keyspace_discriminator]=${WEB}&profiles[1][profile_key]=${b}`;
    expectProblem(
      await server.request('PUT', '/audience/profiles/merges', { token, raw: invalid, headers }),
      400,
      'AUD-1205',
    );
    const conflicting = mail('c13other');
    expect((await create(EMAIL, conflicting)).status).toBe(201);
    const conflict = new URLSearchParams({
      'profiles[0][keyspace_discriminator]': EMAIL,
      'profiles[0][profile_key]': conflicting,
      'profiles[1][keyspace_discriminator]': WEB,
      'profiles[1][profile_key]': b,
    }).toString();
    expectProblem(
      await server.request('PUT', '/audience/profiles/merges', { token, raw: conflict, headers }),
      409,
      'AUD-1215',
    );
  });

  it("COMP-13 the Drupal module's form-encoded merge, which adds time_zone, merges: unknown top-level fields are ignored", async () => {
    const a = mail('drupal');
    const b = uid('cookie');
    expect((await create(EMAIL, a)).status).toBe(201);
    const raw = `profiles[0][keyspace_discriminator]=${EMAIL}&profiles[0][profile_key]=${encodeURIComponent(a)}&profiles[1][keyspace_discriminator]=${WEB}&profiles[1][profile_key]=${b}&time_zone=Europe%2FOslo`;
    expectNoContent(
      await server.request('PUT', '/audience/profiles/merges', {
        token,
        raw,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
    );
    expect(await attrs(WEB, b)).toEqual({ [A_EMAIL]: a });
    // The same in JSON; fields inside a profile reference are not top-level and stay checked.
    const c = uid('cookie');
    expectNoContent(
      await server.request('PUT', '/audience/profiles/merges', {
        token,
        body: {
          profiles: [
            { keyspace_discriminator: EMAIL, profile_key: a },
            { keyspace_discriminator: WEB, profile_key: c },
          ],
          time_zone: 'Europe/Oslo',
        },
      }),
    );
    expect(await attrs(WEB, c)).toEqual({ [A_EMAIL]: a });
    const nested = await server.request('PUT', '/audience/profiles/merges', {
      token,
      body: {
        profiles: [
          { keyspace_discriminator: EMAIL, profile_key: a, extra: 1 },
          { keyspace_discriminator: WEB, profile_key: uid('cookie') },
        ],
      },
    });
    expectProblem(nested, 400);
    expect(nested.body.detail).toContain('profiles[0].extra');
  });

  it('COMP-15 COMP-16 web visitors merge like other profiles; after a 409 a new web key merges with the known profile', async () => {
    const ann = mail('ann');
    const bob = mail('bob');
    const cookie = uid('cookie');
    expect((await create(EMAIL, ann)).status).toBe(201);
    expect((await create(EMAIL, bob)).status).toBe(201);
    // The visitor is a profile of the web keyspace with the usual operations.
    expect((await patchV1(WEB, cookie, { [A_LAST]: 'Visitor' })).status).toBe(204);
    expect((await addPageView(WEB, cookie, 'visit')).status).toBe(204);
    expectNoContent(await merge(id(WEB, cookie), id(EMAIL, ann)));
    expect(await attrs(WEB, cookie)).toEqual({ [A_EMAIL]: ann, [A_LAST]: 'Visitor' });
    // The shared computer: Bob logs in with Ann's cookie.
    expectProblem(await merge(id(WEB, cookie), id(EMAIL, bob)), 409, 'AUD-1215');
    const next = uid('cookie');
    expectNoContent(await merge(id(WEB, next), id(EMAIL, bob)));
    expect(await attrs(WEB, next)).toEqual({ [A_EMAIL]: bob });
    expect(await attrs(WEB, cookie)).toEqual({ [A_EMAIL]: ann, [A_LAST]: 'Visitor' });
    expect((await events(EMAIL, ann)).map((e) => e.data.title)).toEqual(['visit']);
    expect(await events(EMAIL, bob)).toEqual([]);
  });
});

// ---- MRG-06: commutativity and associativity, generated ----

interface Seeded {
  first?: string;
  last?: string;
  vip: boolean;
}

/** Merge steps (pairs of profile indexes) that join exactly the given groups, ordered by `rnd`. */
function mergePlan(groups: number[], rnd: number[]): [number, number][] {
  let at = 0;
  const next = (bound: number) => (bound <= 1 ? 0 : rnd[at++ % rnd.length] % bound);
  const shuffle = <T>(xs: T[]) => {
    for (let i = xs.length - 1; i > 0; i--) {
      const j = next(i + 1);
      [xs[i], xs[j]] = [xs[j], xs[i]];
    }
    return xs;
  };
  const steps: [number, number][] = [];
  for (const label of new Set(groups)) {
    const members = shuffle(groups.flatMap((g, i) => (g === label ? [i] : [])));
    // A random spanning tree of the group, each edge in a random argument order…
    for (let i = 1; i < members.length; i++) {
      const edge: [number, number] = [members[i], members[next(i)]];
      steps.push(next(2) === 0 ? edge : [edge[1], edge[0]]);
    }
    // …and sometimes a redundant merge inside the group.
    if (members.length > 2 && next(2) === 0) steps.push([members[members.length - 1], members[0]]);
  }
  return shuffle(steps);
}

describe('profiles: merge algebra', () => {
  it('MRG-06 argument order and grouping of merges do not change the clusters, their data or their canonical profile', async () => {
    const names = fc.option(fc.constantFrom('Ann', 'Bob', 'Cy', 'Dee'), { nil: undefined });
    const scenario = fc.integer({ min: 2, max: 5 }).chain((n) =>
      fc.record({
        seeds: fc.array(fc.record({ first: names, last: names, vip: fc.boolean() }), { minLength: n, maxLength: n }),
        groups: fc.array(fc.integer({ min: 0, max: n - 1 }), { minLength: n, maxLength: n }),
        orderA: fc.array(fc.nat(), { minLength: 4 * n, maxLength: 4 * n }),
        orderB: fc.array(fc.nat(), { minLength: 4 * n, maxLength: 4 * n }),
      }),
    );

    type Observed = { attributes: Record<string, unknown>; tags: Record<string, boolean> };
    const run = async (seeds: Seeded[], plan: [number, number][]) => {
      const keys = seeds.map(() => uid('m06'));
      // Created one after the other: index order is creation order.
      for (const [i, s] of seeds.entries()) {
        expect((await create(WEB, keys[i])).status).toBe(201);
        const values = { ...(s.first ? { [A_FIRST]: s.first } : {}), ...(s.last ? { [A_LAST]: s.last } : {}) };
        if (Object.keys(values).length > 0) expect((await patchV2(WEB, keys[i], values)).status).toBe(204);
        if (s.vip) expect((await patchTags(WEB, keys[i], { [VIP]: true })).status).toBe(204);
      }
      for (const [x, y] of plan) expectNoContent(await merge(id(WEB, keys[x]), id(WEB, keys[y])));
      const observed: Observed[] = [];
      for (const key of keys) observed.push({ attributes: await attrs(WEB, key), tags: await tags(WEB, key) });
      return { keys, observed };
    };

    /** The clusters as seen through HTTP: a marker written through one key shows through the others. */
    const clustersOf = async (keys: string[]) => {
      const label: number[] = keys.map(() => -1);
      for (let i = 0; i < keys.length; i++) {
        if (label[i] !== -1) continue;
        label[i] = i;
        const marker = `marker-${i}-${uid()}`;
        expect((await patchV2(WEB, keys[i], { [A_LAST]: marker })).status).toBe(204);
        for (let j = i + 1; j < keys.length; j++) if ((await attrs(WEB, keys[j]))[A_LAST] === marker) label[j] = i;
      }
      return label;
    };

    await fc.assert(
      fc.asyncProperty(scenario, async ({ seeds, groups, orderA, orderB }) => {
        const a = await run(seeds, mergePlan(groups, orderA));
        const b = await run(seeds, mergePlan(groups, orderB));
        // The same data through every key, whatever the order…
        expect(b.observed).toEqual(a.observed);
        // …which is, per cluster, the earliest-created member's value of each attribute, and every tag set.
        const expected = seeds.map((_, i): Observed => {
          const members = seeds.filter((__, j) => groups[j] === groups[i]);
          const first = members.find((m) => m.first)?.first;
          const last = members.find((m) => m.last)?.last;
          return {
            attributes: { ...(first ? { [A_FIRST]: first } : {}), ...(last ? { [A_LAST]: last } : {}) },
            tags: members.some((m) => m.vip) ? { [VIP]: true } : {},
          };
        });
        expect(a.observed).toEqual(expected);
        // The same clusters: each labelled by its earliest member.
        const clusters = groups.map((g) => groups.indexOf(g));
        expect(await clustersOf(a.keys)).toEqual(clusters);
        expect(await clustersOf(b.keys)).toEqual(clusters);
        // The same canonical profile: the earliest member cannot be unmerged, the others can.
        for (const { keys } of [a, b]) {
          for (const [i, key] of keys.entries()) {
            const size = groups.filter((g) => g === groups[i]).length;
            if (size > 1 && clusters[i] === i) expectProblem(await unmerge(WEB, key), 400, 'AUD-1217');
          }
          for (const [i, key] of keys.entries()) if (clusters[i] !== i) expectNoContent(await unmerge(WEB, key));
        }
      }),
      { numRuns: 25 },
    );
  }, 120_000);
});
