import { Type } from 'typebox';

/** A date-time in RFC 3339 UTC form (SPEC §1.2). */
export const DateTime = Type.String({ format: 'date-time', description: 'RFC 3339 date-time, UTC' });

/** Keyspace discriminator → what a profile's value of this type allows through that keyspace. */
export const KeyspacePermissions = Type.Record(
  Type.String(),
  Type.Array(Type.Union([Type.Literal('read'), Type.Literal('write')])),
  {
    description: 'Map from keyspace discriminator to the operations allowed through it',
  },
);

/** An account's name: 1 to 255 characters, as the names of definitions. */
export const AccountName = Type.String({
  minLength: 1,
  maxLength: 255,
  description: 'Account name, 1 to 255 characters',
});
