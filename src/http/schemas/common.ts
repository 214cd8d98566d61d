import { Type } from 'typebox';

/** The `include_keyspace_permissions` query parameter of the definition routes. Other query parameters are ignored, as clients add their own. */
export const PermissionsQuery = Type.Object({
  include_keyspace_permissions: Type.Optional(
    Type.Boolean({ default: false, description: 'Add keyspace_permissions to each item' }),
  ),
});

/** Wraps an item schema as a list answer (SPEC §1.3). */
export const Items = <T extends Parameters<typeof Type.Array>[0]>(item: T, description: string) =>
  Type.Object({ items: Type.Array(item, { description }) });

export const SectionParams = Type.Object({
  section_discriminator: Type.String({ description: 'Section discriminator' }),
});

// Account ids are bigints: more than 18 digits could not be one, and PostgreSQL would refuse the cast.
export const AccountId = Type.String({ pattern: '^[0-9]{1,18}$', description: 'Account id' });
/** The path of an operator route on one account. */
export const AccountParams = Type.Object({ account_id: AccountId });
