import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import { Value } from 'typebox/value';
import { AccountManifest } from '../accounts/manifest.ts';

/**
 * The emulator's fixture file (docs/emulator.md "Fixtures"): a whole account manifest
 * (docs/manifest.md, activities and suppressions included) and, beside it under `seed`, the
 * profiles the ready account starts with. The seed is written through the service's own public
 * routes with the ready account's key, so it meets every rule a client's write meets, and a seed
 * the service refuses stops the start naming the item and the service's answer.
 */

const Discriminator = Type.String({ minLength: 1, maxLength: 255 });

const SeedEvent = Type.Object(
  {
    event: Type.Optional(Type.String({ description: "An event's discriminator: its current version" })),
    version_id: Type.Optional(Type.String({ description: 'An event version id (instead of event)' })),
    event_time: Type.String({ format: 'date-time' }),
    data: Type.Record(Type.String(), Type.Unknown()),
  },
  { additionalProperties: false },
);

const SeedProfile = Type.Object(
  {
    keyspace: Discriminator,
    key: Type.String({ minLength: 1, maxLength: 1024 }),
    section: Discriminator,
    /** Attribute discriminator → value, as the version 2 attribute PATCH takes them. */
    attributes: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    tags: Type.Optional(Type.Array(Discriminator)),
    consents: Type.Optional(
      Type.Array(
        Type.Object(
          {
            topic_discriminator: Discriminator,
            channel_discriminator: Discriminator,
            type: Type.String(),
            reason: Type.Optional(Type.String()),
            source: Type.Optional(Type.String()),
          },
          { additionalProperties: false },
        ),
      ),
    ),
    events: Type.Optional(Type.Array(SeedEvent)),
  },
  { additionalProperties: false },
);

export const Seed = Type.Object(
  { profiles: Type.Optional(Type.Array(SeedProfile, { maxItems: 10_000 })) },
  { additionalProperties: false },
);
export type Seed = Static<typeof Seed>;

/** A fixture file: an account manifest with an optional `seed`. */
export const Fixture = Type.Object(
  { ...AccountManifest.properties, seed: Type.Optional(Seed) },
  { additionalProperties: false, title: 'EmulatorFixture' },
);

/**
 * Checks a fixture file's document; answers its manifest and its seed, or throws naming the first
 * field at fault.
 */
export function readFixture(document: unknown): { manifest: AccountManifest; seed?: Seed } {
  if (!Value.Check(Fixture, document)) {
    const [first] = Value.Errors(Fixture, document);
    throw new Error(
      `the manifest is not one: ${first.instancePath || '/'} ${first.message} (docs/manifest.md, docs/emulator.md "Fixtures")`,
    );
  }
  const { seed, ...manifest } = document as Static<typeof Fixture>;
  return { manifest, ...(seed ? { seed } : {}) };
}

const enc = encodeURIComponent;

/**
 * Writes the seed through the public routes of `app` with the ready account's key. `{vendor}` in
 * any of its texts is the configured vendor word, as in a manifest. Throws naming the item and the
 * answer of the first write the service refuses.
 */
export async function applySeed(
  app: FastifyInstance,
  seed: Seed,
  key: { client_id: string; client_secret: string },
  vendor: string,
): Promise<void> {
  const filled = JSON.parse(JSON.stringify(seed).replaceAll('{vendor}', vendor)) as Seed;
  const tokenAnswer = await app.inject({
    method: 'POST',
    url: '/oauth/token',
    payload: { grant_type: 'client_credentials', client_id: key.client_id, client_secret: key.client_secret },
  });
  if (tokenAnswer.statusCode !== 200) throw new Error(`the seed's token was refused: ${tokenAnswer.body}`);
  const token = (tokenAnswer.json() as { access_token: string }).access_token;
  const call = async (what: string, method: 'GET' | 'POST' | 'PATCH', url: string, payload?: unknown) => {
    const res = await app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${token}` },
      ...(payload === undefined ? {} : { payload: payload as object }),
    });
    if (res.statusCode >= 300) {
      const body = res.headers['content-type']?.includes('json') ? (res.json() as { detail?: string }) : {};
      throw new Error(`the seed's ${what} was refused: ${res.statusCode} ${body.detail ?? res.body}`);
    }
    return res;
  };
  // Event discriminators to their current version's id, per section, read once.
  const eventVersions = new Map<string, Map<string, string>>();
  const versionOf = async (what: string, section: string, event: string) => {
    if (!eventVersions.has(section)) {
      const res = await call(what, 'GET', `/audience/sections/${enc(section)}/events`);
      const items = (res.json() as { items: { discriminator: string; versions: { id: string }[] }[] }).items;
      eventVersions.set(section, new Map(items.map((e) => [e.discriminator, e.versions.at(-1)!.id])));
    }
    const id = eventVersions.get(section)!.get(event);
    if (!id) throw new Error(`the seed's ${what}.event: section ${section} has no event ${event}`);
    return id;
  };
  for (const [i, p] of (filled.profiles ?? []).entries()) {
    const at = `profiles[${i}]`;
    const base = `/audience/keyspaces/${enc(p.keyspace)}/profiles/${enc(p.key)}/sections/${enc(p.section)}`;
    // The first attribute PATCH creates the profile, so a profile listed with nothing else exists too.
    await call(at, 'PATCH', `${base}/attributes`, {});
    if (p.attributes && Object.keys(p.attributes).length > 0)
      await call(`${at}.attributes`, 'PATCH', `/v2${base}/attributes`, p.attributes);
    if (p.tags?.length)
      await call(`${at}.tags`, 'PATCH', `${base}/tags`, Object.fromEntries(p.tags.map((t) => [t, true])));
    for (const [j, c] of (p.consents ?? []).entries())
      await call(`${at}.consents[${j}]`, 'POST', `/v2${base}/consents`, {
        reason: 'Emulator seed',
        source: 'Emulator seed',
        ...c,
      });
    if (p.events?.length) {
      const items = [];
      for (const [j, e] of p.events.entries()) {
        const what = `${at}.events[${j}]`;
        if ((e.event === undefined) === (e.version_id === undefined))
          throw new Error(`the seed's ${what} needs one of event (a discriminator) or version_id`);
        const version_id = e.version_id ?? (await versionOf(what, p.section, e.event!));
        items.push({ event_time: e.event_time, version_id, data: e.data });
      }
      for (let k = 0; k < items.length; k += 100)
        await call(`${at}.events`, 'POST', `${base}/events`, { items: items.slice(k, k + 100) });
    }
  }
}
