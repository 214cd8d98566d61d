import { beforeAll, describe, expect, it } from 'vitest';
import {
  type Account,
  CH_EMAIL,
  CH_SMS,
  CRM,
  EMAIL,
  LOYALTY,
  MOBILE,
  PARTNER,
  PLAIN,
  SMS_OFFERS,
  STAFF,
  V,
  VIP,
  WEEKLY,
  account,
  attr,
  create,
  expectProblem,
  importsServer,
  v2,
} from '../../test/imports-http.ts';

/** Import requests through real HTTP: tag, keyspace and consent mappings and what the keyspace allows (IMP-16 to IMP-32). */

importsServer();

describe('creating an import', () => {
  let a: Account;
  beforeAll(async () => {
    a = await account();
  });

  it('IMP-16 tag_mappings: at most 100 items {tag_discriminator}; over 100 → 413', async () => {
    const tags = (n: number) => Array.from({ length: n }, () => ({ tag_discriminator: VIP }));
    expect(
      (
        await create(
          a,
          2,
          v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)], tag_mappings: tags(100) }),
        )
      ).status,
    ).toBe(201);
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)], tag_mappings: tags(101) }),
      ),
      413,
    );
    expectProblem(
      await create(a, 1, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: [attr('first', a.v.firstname)],
        tag_mappings: tags(101),
      }),
      413,
    );
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)], tag_mappings: [{}] }),
      ),
      400,
      /tag_discriminator/,
    );
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          tag_mappings: [{ tag_discriminator: `${V}.tags.user-created.nope` }],
        }),
      ),
      400,
    );
  });

  it('IMP-17 version 1: keyspace_mappings required with 1 to 10 items {keyspace_discriminator, field_selector, merge_profiles}; consent items carry address_field_selector', async () => {
    const attributes = [attr('first', a.v.firstname)];
    expectProblem(await create(a, 1, { attribute_mappings: attributes }), 400, /keyspace_mappings/);
    expectProblem(await create(a, 1, { keyspace_mappings: [], attribute_mappings: attributes }), 400);
    const eleven = Array.from({ length: 11 }, () => ({
      keyspace_discriminator: EMAIL,
      field_selector: 'email',
      merge_profiles: true,
    }));
    expectProblem(await create(a, 1, { keyspace_mappings: eleven, attribute_mappings: attributes }), 413);
    expectProblem(
      await create(a, 1, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email', merge_profiles: 'yes' }],
        attribute_mappings: attributes,
      }),
      400,
    );
    // Version 1 has no keyspace_mapping (the version 2 form).
    expectProblem(
      await create(a, 1, {
        keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' },
        attribute_mappings: attributes,
      }),
      400,
    );
    const consent = {
      resubscribe_if_opted_out: true,
      field_selector: 'news',
      address_field_selector: 'mail',
      channel_discriminator: CH_EMAIL,
      topic_discriminator: WEEKLY,
      type: 'opt-in',
    };
    const ok = await create(a, 1, {
      keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email', merge_profiles: false }],
      attribute_mappings: attributes,
      consent_mappings: [{ consents: [consent] }],
    });
    expect(ok.status, ok.text).toBe(201);
    // address_field_selector belongs to version 1 only.
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', { attribute_mappings: attributes, consent_mappings: [{ consents: [consent] }] }),
      ),
      400,
      /address_field_selector/,
    );
    // With a PLAIN account, ten keyspace mappings are accepted.
    const plain = await account(PLAIN);
    const ten = Array.from({ length: 10 }, (_, i) => ({
      keyspace_discriminator: i % 2 ? CRM : EMAIL,
      field_selector: `k${i}`,
      merge_profiles: false,
    }));
    expect(
      (await create(plain, 1, { keyspace_mappings: ten, attribute_mappings: [attr('first', plain.v.firstname)] }))
        .status,
    ).toBe(201);
  });

  it('IMP-18 an import through a keyspace whose manage_subscriptions is false → 403', async () => {
    const attributes = [attr('first', a.v.firstname)];
    for (const keyspace of [PARTNER, `${V}.keyspaces.web`, `${V}.keyspaces.export`]) {
      expectProblem(await create(a, 2, v2(keyspace, 'id', { attribute_mappings: attributes })), 403, /subscriptions/);
      expectProblem(
        await create(a, 1, {
          keyspace_mappings: [{ keyspace_discriminator: keyspace, field_selector: 'id' }],
          attribute_mappings: attributes,
        }),
        403,
        /subscriptions/,
      );
    }
    // An integration keyspace that manages subscriptions may be used.
    expect((await create(a, 2, v2(LOYALTY, 'id', { attribute_mappings: attributes }))).status).toBe(201);
  });

  it('IMP-19 an import writing an attribute or tag not writable through the selected keyspace → 403', async () => {
    // "Score" and "Staff" are read-only through the email keyspace, writable through the CRM keyspace.
    expectProblem(
      await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('score', a.v.score)] })),
      403,
      /score.*not writable/i,
    );
    expectProblem(
      await create(a, 1, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: [attr('score', a.v.score)],
      }),
      403,
    );
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          tag_mappings: [{ tag_discriminator: STAFF }],
        }),
      ),
      403,
      /staff.*not writable/i,
    );
    expectProblem(
      await create(a, 1, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: [attr('first', a.v.firstname)],
        tag_mappings: [{ tag_discriminator: STAFF }],
      }),
      403,
    );
    expect(
      (
        await create(
          a,
          2,
          v2(CRM, 'crm', {
            attribute_mappings: [attr('score', a.v.score)],
            tag_mappings: [{ tag_discriminator: STAFF }],
          }),
        )
      ).status,
    ).toBe(201);
  });

  it('IMP-20 version 1 with more than one keyspace mapping while channel-specific topics are enabled → 400', async () => {
    const two = [
      { keyspace_discriminator: EMAIL, field_selector: 'email', merge_profiles: true },
      { keyspace_discriminator: CRM, field_selector: 'crm', merge_profiles: true },
    ];
    expectProblem(
      await create(a, 1, { keyspace_mappings: two, attribute_mappings: [attr('first', a.v.firstname)] }),
      400,
      /channel-specific/,
    );
    expect(
      (await create(a, 1, { keyspace_mappings: two.slice(0, 1), attribute_mappings: [attr('first', a.v.firstname)] }))
        .status,
    ).toBe(201);
    // Without channel-specific topics on the account, several mappings are fine.
    const plain = await account(PLAIN);
    expect(
      (await create(plain, 1, { keyspace_mappings: two, attribute_mappings: [attr('first', plain.v.firstname)] }))
        .status,
    ).toBe(201);
  });

  it('IMP-22 version 2 takes one keyspace only: no keyspace list, no merge_profiles', async () => {
    expectProblem(
      await create(a, 2, {
        keyspace_mapping: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: [attr('first', a.v.firstname)],
      }),
      400,
    );
    expectProblem(
      await create(a, 2, {
        keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email', merge_profiles: true },
        attribute_mappings: [attr('first', a.v.firstname)],
      }),
      400,
      /merge_profiles/,
    );
  });

  it("IMP-23 version 2, channel-specific topic: channel_discriminator may be omitted; when given it must be the topic's channel, otherwise 400", async () => {
    const body = (channel?: string) =>
      v2(MOBILE, 'mobile', {
        attribute_mappings: [attr('first', a.v.firstname)],
        consent_mappings: [
          {
            consents: [
              {
                field_selector: 'sms',
                topic_discriminator: SMS_OFFERS,
                type: 'opt-in',
                ...(channel ? { channel_discriminator: channel } : {}),
              },
            ],
          },
        ],
      });
    expect((await create(a, 2, body())).status).toBe(201);
    expect((await create(a, 2, body(CH_SMS))).status).toBe(201);
    expectProblem(await create(a, 2, body(CH_EMAIL)), 400, /channel/);
  });

  it('IMP-24 version 2, topic that is not channel-specific: channel_discriminator is required; missing → 400', async () => {
    const body = (channel?: string) =>
      v2(EMAIL, 'email', {
        attribute_mappings: [attr('first', a.v.firstname)],
        consent_mappings: [
          {
            consents: [
              {
                field_selector: 'news',
                topic_discriminator: WEEKLY,
                type: 'opt-in',
                ...(channel ? { channel_discriminator: channel } : {}),
              },
            ],
          },
        ],
      });
    expectProblem(await create(a, 2, body()), 400, /channel_discriminator/);
    expect((await create(a, 2, body(CH_EMAIL))).status).toBe(201);
    expect((await create(a, 2, body(CH_SMS))).status).toBe(201);
  });

  it('IMP-32 two consent mappings for the same topic and channel in one request → 400', async () => {
    const consent = (field: string, channel?: string) => ({
      field_selector: field,
      topic_discriminator: SMS_OFFERS,
      type: 'opt-in',
      ...(channel ? { channel_discriminator: channel } : {}),
    });
    expectProblem(
      await create(
        a,
        2,
        v2(MOBILE, 'mobile', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [{ consents: [consent('a', CH_SMS)] }, { consents: [consent('b', CH_SMS)] }],
        }),
      ),
      400,
      /same topic|already updates/i,
    );
    // The channel inferred from the topic is the same channel as one given.
    expectProblem(
      await create(
        a,
        2,
        v2(MOBILE, 'mobile', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [{ consents: [consent('a'), consent('b', CH_SMS)] }],
        }),
      ),
      400,
    );
    const weekly = (field: string) => ({
      field_selector: field,
      address_field_selector: 'mail',
      topic_discriminator: WEEKLY,
      channel_discriminator: CH_EMAIL,
      type: 'opt-in',
    });
    expectProblem(
      await create(a, 1, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: [attr('first', a.v.firstname)],
        consent_mappings: [{ consents: [weekly('a')] }, { consents: [weekly('b')] }],
      }),
      400,
    );
    // The same topic on two channels is no conflict.
    expect(
      (
        await create(
          a,
          2,
          v2(EMAIL, 'email', {
            attribute_mappings: [attr('first', a.v.firstname)],
            consent_mappings: [
              {
                consents: [
                  { field_selector: 'a', topic_discriminator: WEEKLY, channel_discriminator: CH_EMAIL, type: 'opt-in' },
                  { field_selector: 'b', topic_discriminator: WEEKLY, channel_discriminator: CH_SMS, type: 'opt-in' },
                ],
              },
            ],
          }),
        )
      ).status,
    ).toBe(201);
  });
});
