import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  accountId,
  CLUB_S,
  create,
  EMAIL,
  enc,
  id,
  mail,
  merge,
  server,
  token,
  uid,
  unmerge,
  useProfileLifecycle,
  WEB,
  expectNoContent,
} from '../../test/profile-lifecycle.ts';

/**
 * GET /audience/profiles/merges/keyspaces/{keyspace}/profiles/{key} through real HTTP: the merge
 * cluster of a profile, canonical first, each member with when it was merged and its keys
 * (the canonical profile of MRG-12, reads through either key of MRG-05, and MRG-13's unmerge seen from the cluster).
 */

useProfileLifecycle();

const cluster = (ks: string, pk: string, t = token) =>
  server.request('GET', `/audience/profiles/merges/keyspaces/${ks}/profiles/${enc(pk)}`, { token: t });

describe('GET merge cluster', () => {
  it('answers a standalone profile alone, canonical, never merged', async () => {
    const a = mail('cl');
    expect((await create(EMAIL, a)).status).toBe(201);
    const res = await cluster(EMAIL, a);
    expect(res.status, res.text).toBe(200);
    expect(res.body.items).toHaveLength(1);
    expect(res.body.items[0]).toMatchObject({ canonical: true, merged_at: null });
    expect(res.body.items[0].keys).toContainEqual(id(EMAIL, a));
  });

  it('lists the canonical profile first and each merged one with its keys and when it was merged, through either key (MRG-05, MRG-12, MRG-13)', async () => {
    const a = mail('cl');
    const b = uid('cookie');
    expect((await create(EMAIL, a)).status).toBe(201);
    expect((await create(WEB, b)).status).toBe(201);
    server.clock.advance(60_000);
    const mergedAt = new Date(server.clock.now).toISOString();
    expectNoContent(await merge(id(WEB, b), id(EMAIL, a)));
    server.clock.advance(60_000);
    const fromA = await cluster(EMAIL, a);
    expect(fromA.status, fromA.text).toBe(200);
    const [canonical, member] = fromA.body.items;
    expect(fromA.body.items).toHaveLength(2);
    // The earliest-created profile is canonical, whichever the merge named first.
    expect(canonical.canonical).toBe(true);
    expect(canonical.keys).toContainEqual(id(EMAIL, a));
    expect(member).toMatchObject({ canonical: false, merged_at: mergedAt });
    expect(member.keys).toContainEqual(id(WEB, b));
    expect(member.keys).not.toContainEqual(id(EMAIL, a));
    // Read through the member, the same cluster.
    expect((await cluster(WEB, b)).body).toEqual(fromA.body);
    // A third profile joins later; the member keeps its time.
    const c = uid('cookie');
    expect((await create(WEB, c)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, a), id(WEB, c)));
    const three = (await cluster(WEB, c)).body.items;
    expect(three.map((m: { canonical: boolean }) => m.canonical)).toEqual([true, false, false]);
    expect(three[1].merged_at).toBe(mergedAt);
    expect(three[2].merged_at).toBe(new Date(server.clock.now).toISOString());
    // Unmerged, a member is a cluster of its own again.
    expectNoContent(await unmerge(WEB, b));
    expect((await cluster(WEB, b)).body.items).toEqual([{ canonical: true, merged_at: null, keys: expect.any(Array) }]);
    expect((await cluster(EMAIL, a)).body.items).toHaveLength(2);
  });

  it('refuses a key restricted to some sections with 403 AUD-1107, as merge and unmerge do', async () => {
    const a = mail('cl');
    expect((await create(EMAIL, a)).status).toBe(201);
    const clubOnly = await server.token(await server.createKey(accountId, { section_discriminators: [CLUB_S] }));
    expectProblem(await cluster(EMAIL, a, clubOnly), 403, 'AUD-1107');
  });

  it('answers 404 AUD-1201 for an unknown profile, AUD-1101 for an unknown keyspace', async () => {
    expectProblem(await cluster(EMAIL, mail('nobody')), 404, 'AUD-1201');
    expectProblem(await cluster(`${EMAIL}-gone`, mail('nobody')), 404, 'AUD-1101');
  });

  it('refuses a key that is no email address with a problem naming the field', async () => {
    const detail = expectProblem(await cluster(EMAIL, 'not an address'), 400, 'AUD-1205');
    expect(detail).toContain('profile_key');
  });
});
