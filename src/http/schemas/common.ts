import { Type } from 'typebox';

/** A date-time in RFC 3339 UTC form (SPEC §1.2). */
export const DateTime = Type.String({ format: 'date-time', description: 'RFC 3339 date-time, UTC' });

/** The `include_keyspace_permissions` query parameter of the definition routes. Other query parameters are ignored, as clients add their own. */
export const PermissionsQuery = Type.Object({
  include_keyspace_permissions: Type.Optional(Type.Boolean({ default: false, description: 'Add keyspace_permissions to each item' })),
});

/** Keyspace discriminator → what a profile's value of this type allows through that keyspace. */
export const KeyspacePermissions = Type.Record(Type.String(), Type.Array(Type.Union([Type.Literal('read'), Type.Literal('write')])), {
  description: 'Map from keyspace discriminator to the operations allowed through it',
});

/** Wraps an item schema as a list answer (SPEC §1.3). */
export const Items = <T extends Parameters<typeof Type.Array>[0]>(item: T, description: string) =>
  Type.Object({ items: Type.Array(item, { description }) });

export const SectionParams = Type.Object({
  section_discriminator: Type.String({ description: 'Section discriminator' }),
});
