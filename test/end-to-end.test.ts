import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHOP, TestServer } from './app.ts';

let server: TestServer;
beforeAll(async () => {
  server = await TestServer.start();
});
afterAll(async () => server?.close());

const S = 'com.vendor1.sections.user-created.shop';
const EMAIL = 'com.vendor1.keyspaces.email';

describe('end to end: one profile', () => {
  it('creates, reads, patches, merges, unmerges, adds events, locks', async () => {
    const { token } = await server.login(SHOP);
    const attrs = await server.request('GET', `/audience/sections/${S}/attributes`, { token });
    const emailVersion = attrs.body.items.find((a: any) => a.discriminator === 'com.vendor1.attributes.email')
      .versions[0].id;
    let r = await server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${S}/profiles`, {
      token,
      body: { profile_key: ' Ann@Example.com ' },
    });
    expect(r.status, r.text).toBe(201);
    expect(r.body).toEqual({ keyspace_discriminator: EMAIL, profile_key: 'ann@example.com' });
    r = await server.request(
      'GET',
      `/audience/keyspaces/${EMAIL}/profiles/ann%40example.com/sections/${S}/attributes`,
      { token },
    );
    expect(r.body).toEqual({ [emailVersion]: 'ann@example.com' });
    r = await server.request(
      'PATCH',
      `/v2/audience/keyspaces/${EMAIL}/profiles/ann@example.com/sections/${S}/attributes`,
      {
        token,
        body: { 'com.vendor1.attributes.firstname': 'Ann' },
        headers: { 'content-type': 'application/merge-patch+json' },
      },
    );
    expect(r.status, r.text).toBe(204);
    r = await server.request('PUT', '/audience/profiles/merges', {
      token,
      body: {
        profiles: [
          { keyspace_discriminator: EMAIL, profile_key: 'ann@example.com' },
          { keyspace_discriminator: 'com.vendor1.keyspaces.web', profile_key: 'cookie-1' },
        ],
      },
    });
    expect(r.status, r.text).toBe(204);
    r = await server.request(
      'GET',
      `/audience/keyspaces/com.vendor1.keyspaces.web/profiles/cookie-1/sections/${S}/attributes`,
      { token },
    );
    expect(Object.values(r.body)).toContain('Ann');
    r = await server.request(
      'POST',
      `/audience/keyspaces/com.vendor1.keyspaces.web/profiles/cookie-1/sections/${S}/events`,
      {
        token,
        body: {
          items: [
            {
              event_time: '2026-01-01T00:00:00Z',
              version_id: (await server.request('GET', `/audience/sections/${S}/events`, { token })).body.items[0]
                .versions[0].id,
              data: { url: 'https://x' },
            },
          ],
        },
      },
    );
    expect(r.status, r.text).toBe(204);
    r = await server.request('GET', `/audience/keyspaces/${EMAIL}/profiles/ann@example.com/sections/${S}/events`, {
      token,
    });
    expect(r.body.items).toHaveLength(1);
    r = await server.request(
      'DELETE',
      `/audience/profiles/merges/keyspaces/com.vendor1.keyspaces.web/profiles/cookie-1`,
      { token },
    );
    expect(r.status, r.text).toBe(204);
    r = await server.request(
      'GET',
      `/audience/keyspaces/com.vendor1.keyspaces.web/profiles/cookie-1/sections/${S}/attributes`,
      { token },
    );
    expect(r.body).toEqual({});
    r = await server.request('GET', `/audience/keyspaces/${EMAIL}/profiles/ann@example.com/sections/${S}/attributes`, {
      token,
    });
    expect(Object.values(r.body)).toContain('Ann');
    r = await server.request('PUT', `/audience/keyspaces/${EMAIL}/profiles/ann@example.com/locks`, {
      token,
      headers: { 'content-type': 'application/json' },
      raw: '',
    });
    expect(r.status, r.text).toBe(204);
    r = await server.request('GET', `/audience/keyspaces/${EMAIL}/profiles/ann@example.com/sections/${S}/attributes`, {
      token,
    });
    expect(r.status).toBe(410);
    r = await server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${S}/profiles`, {
      token,
      body: { profile_key: 'ann@example.com' },
    });
    expect(r.status).toBe(410);
  });
});

describe('end to end: segments', () => {
  it('evaluates, counts and trends', async () => {
    const { token } = await server.login(SHOP);
    for (const [key, points] of [
      ['a@x.io', 150],
      ['b@x.io', 50],
    ] as const) {
      let r = await server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${S}/profiles`, {
        token,
        body: { profile_key: key },
      });
      expect(r.status, r.text).toBe(201);
      r = await server.request('PATCH', `/v2/audience/keyspaces/${EMAIL}/profiles/${key}/sections/${S}/attributes`, {
        token,
        body: { 'com.vendor1.attributes.user-created.points': points },
      });
      expect(r.status, r.text).toBe(204);
    }
    const seg = 'com.vendor1.segments.user-created.big-spenders';
    let r = await server.request('POST', `/audience/keyspaces/${EMAIL}/profiles/a@x.io/evaluations`, {
      token,
      body: { segments: [{ discriminator: seg }], time_zone: 'Europe/Oslo' },
    });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({ matches: { segments: { [seg]: true } } });
    r = await server.request('POST', '/audience/profiles/reports/segments/count', {
      token,
      body: {
        section_discriminator: S,
        segment: { timezone: 'UTC', segment_discriminator: seg },
        known_profiles: true,
      },
    });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({ profile_count: 1 });
    server.clock.advance(1000);
    r = await server.request('POST', '/audience/profiles/reports/segments/count', {
      token,
      body: {
        section_discriminator: S,
        segment: { timezone: 'UTC', segment_definition: 'section(1).attribute("x").eq(1)' },
      },
    });
    expect(r.status, r.text).toBe(400);
    const now = new Date(Date.now() + 60_000).toISOString();
    r = await server.request('POST', `/audience/sections/${S}/segments/${seg}/trend`, {
      token,
      body: { sampling_points: ['2020-01-01T00:00:00Z', now], timezone: 'UTC' },
    });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({
      matching_profile_count: { '2020-01-01T00:00:00Z': { known: 0, unknown: 0 }, [now]: { known: 1, unknown: 0 } },
    });
  });
});
