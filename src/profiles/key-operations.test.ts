import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  A_EMAIL,
  A_FIRST,
  EMAIL,
  SHOP_S,
  TWO,
  VIP,
  attrs,
  create,
  events,
  getSection,
  lock,
  mail,
  patchTags,
  patchV2,
  server,
  tags,
  token,
  useProfileLifecycle,
} from '../../test/profile-lifecycle.ts';

/**
 * The limit of operations per profile key through real HTTP (LIM-07).
 */

useProfileLifecycle();

// ---- LIM-07 ----

describe('profiles: operations per key', () => {
  it('LIM-07 the 11th operation on one key within a second → 429; another key is free; a second later it is free again', async () => {
    const limited = await server.login(TWO, {
      requests_per_second: null,
      token_requests_per_minute: null,
      profile_key_operations_per_second: 10,
    });
    const t = limited.token;
    const busy = mail('busy');
    const other = mail('other');
    expect((await create(EMAIL, busy, SHOP_S, t)).status).toBe(201);
    expect((await create(EMAIL, other, SHOP_S, t)).status).toBe(201);
    const operations = [
      () => getSection(EMAIL, busy, 'attributes', SHOP_S, t),
      () => getSection(EMAIL, busy, 'tags', SHOP_S, t),
      () => patchV2(EMAIL, busy, { [A_FIRST]: 'Busy' }, SHOP_S, t),
      () => getSection(EMAIL, busy, 'events', SHOP_S, t),
      () => patchTags(EMAIL, busy, { [VIP]: true }, SHOP_S, t),
    ];
    for (let i = 0; i < 10; i++) {
      const r = await operations[i % operations.length]();
      expect(r.status, `operation ${i + 1}: ${r.text}`).toBeLessThan(300);
    }
    const refused = await getSection(EMAIL, busy, 'attributes', SHOP_S, t);
    expectProblem(refused, 429, 'AUD-1002');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // The raw spelling of the key is the same key.
    expectProblem(
      await server.request('GET', `/audience/keyspaces/${EMAIL}/profiles/${busy}/sections/${SHOP_S}/tags`, {
        token: t,
      }),
      429,
      'AUD-1002',
    );
    expectProblem(await lock(EMAIL, busy, t), 429, 'AUD-1002');
    // So is another spelling of the same address: the limit is on the profile key, not on the text.
    expectProblem(await getSection(EMAIL, ` ${busy.toUpperCase()}`, 'attributes', SHOP_S, t), 429, 'AUD-1002');
    // Another key is not affected.
    expect((await getSection(EMAIL, other, 'attributes', SHOP_S, t)).status).toBe(200);

    server.clock.advance(1000);
    expect(await attrs(EMAIL, busy, SHOP_S, t)).toEqual({ [A_EMAIL]: busy, [A_FIRST]: 'Busy' });
  });
});
