import { activitiesFollowProfiles } from '../../activities/events.ts';
import * as attributes from '../../profiles/attributes.ts';
import * as browse from '../../profiles/browse.ts';
import * as events from '../../profiles/events.ts';
import * as profiles from '../../profiles/profiles.ts';
import {
  AttributeHistory,
  AttributeParams,
  AttributeValues,
  CreateProfile,
  CreateProfileParams,
  Events,
  EventsQuery,
  Growth,
  GrowthQuery,
  HistoryQuery,
  KeyUpdateQuery,
  Merge,
  MergeCluster,
  MergePatch,
  NewEvents,
  ProfileList,
  ProfileListQuery,
  ProfileParams,
  ProfileSectionParams,
  Switch,
  TagValues,
  UniqueIdentifier,
  VersionParams,
} from '../../profiles/schemas.ts';
import { WRITE_GRANT_PROBLEMS } from '../../core/definitions.ts';
import { ALL_SECTIONS_PROBLEMS, SECTION_PROBLEMS } from '../../definitions/definitions.ts';
import { CLEAR_PROBLEMS, ENTRY_PROBLEMS } from '../../profiles/attributes.ts';
import { IDENTIFIER_PROBLEMS, LOCATE_PROBLEMS, READ_ONLY_PROBLEMS } from '../../profiles/locate.ts';
import { operation, type OperationTable } from '../operation.ts';
import { SectionParams } from '../schemas/common.ts';
import { NoContent } from '../schemas/problem.ts';

const base = '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/sections/:section_discriminator';
const scope = 'account';
/** The refusals of a read of a profile's data in a section. */
const sectionRead = [...SECTION_PROBLEMS, ...LOCATE_PROBLEMS];
/** The refusals of a write of a profile's data in a section, before its own checks. */
const sectionWrite = [...sectionRead, ...READ_ONLY_PROBLEMS];
/** The refusals of an operation on a profile's data in every section. */
const wholeProfile = [...LOCATE_PROBLEMS, ...ALL_SECTIONS_PROBLEMS];
/** The profile updates of SPEC §8 whose over-large bodies have an error of their own. */
const bodyTooLarge = 'AUD-1210';

/** Profiles (SPEC §4.3 and §4.4) on the routes of ENDPOINTS.md "Profiles". */
export const profilesRoutes: OperationTable = {
  tags: ['profiles'],
  operations: [
    operation({
      method: 'POST',
      path: '/audience/keyspaces/:keyspace_discriminator/sections/:section_discriminator/profiles',
      summary: 'Create a profile',
      description:
        'Creates the profile of a key in a keyspace and section, and answers its unique identifier. 409 when the key already has a profile.',
      errors: [...SECTION_PROBLEMS, ...IDENTIFIER_PROBLEMS, ...READ_ONLY_PROBLEMS, 'AUD-1202', 'AUD-1204'],
      params: CreateProfileParams,
      body: CreateProfile,
      response: { 201: UniqueIdentifier },
      scope,
      transaction: true,
      handle: ({ db, scope, params, body }) =>
        profiles.createProfile(db, scope, { ...params, profile_key: body.profile_key }),
    }),
    operation({
      method: 'PUT',
      path: '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/locks',
      summary: 'Lock a profile for good',
      description:
        "Locks a profile: its data is erased and every later request for its key answers 410, as the law's right to be forgotten asks. It cannot be undone.",
      errors: wholeProfile,
      params: ProfileParams,
      response: { 204: NoContent },
      scope,
      transaction: true,
      handle: ({ db, scope, params }) => profiles.lockProfile(db, scope, params, activitiesFollowProfiles),
    }),
    operation({
      method: 'DELETE',
      path: '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key',
      summary: 'Delete a profile',
      description: 'Deletes a profile and its data in every section; the key may be used again afterwards.',
      errors: wholeProfile,
      params: ProfileParams,
      response: { 204: NoContent },
      scope,
      transaction: true,
      handle: ({ db, scope, params }) => profiles.deleteProfile(db, scope, params, activitiesFollowProfiles),
    }),
    operation({
      method: 'PUT',
      path: '/audience/profiles/merges',
      summary: 'Merge two profiles',
      description:
        'Merges exactly two profiles into one cluster: the first becomes canonical and answers for both keys. A key no profile has gets one (an unknown export key answers 404); a locked profile locks the other instead. The body is JSON or a bracket-key form. A profile takes part in at most 500 merges; blocking attributes with different values refuse the merge.',
      errors: [
        ...IDENTIFIER_PROBLEMS,
        'AUD-1201',
        ...ALL_SECTIONS_PROBLEMS,
        'AUD-1204',
        'AUD-1214',
        'AUD-1215',
        'AUD-1216',
      ],
      body: Merge,
      response: { 204: NoContent },
      scope,
      transaction: true,
      handle: ({ db, scope, body }) => profiles.mergeProfiles(db, scope, body.profiles, activitiesFollowProfiles),
    }),
    operation({
      method: 'DELETE',
      path: '/audience/profiles/merges/keyspaces/:keyspace_discriminator/profiles/:profile_key',
      summary: 'Unmerge a profile from its cluster',
      description:
        'Takes a profile out of the cluster it was merged into; it keeps the data it brought. The canonical profile cannot be unmerged.',
      errors: [...wholeProfile, 'AUD-1217'],
      params: ProfileParams,
      response: { 204: NoContent },
      scope,
      transaction: true,
      handle: ({ db, scope, params }) => profiles.unmergeProfile(db, scope, params, activitiesFollowProfiles),
    }),
    operation({
      method: 'GET',
      path: '/audience/profiles/merges/keyspaces/:keyspace_discriminator/profiles/:profile_key',
      summary: 'Merge cluster of a profile',
      examples: {
        response: {
          200: {
            items: [
              {
                canonical: true,
                merged_at: null,
                keys: [{ keyspace_discriminator: 'com.vendor1.keyspaces.email', profile_key: 'ann@example.com' }],
              },
              {
                canonical: false,
                merged_at: '2026-03-01T09:30:00.000Z',
                keys: [
                  {
                    keyspace_discriminator: 'com.vendor1.keyspaces.web',
                    profile_key: 'c2f1e7a4-0b6d-4f1e-9a55-3d7c2b8e1f00',
                  },
                ],
              },
            ],
          },
        },
      },
      description:
        'The profiles of the merge cluster a profile belongs to: the canonical profile first, then each merged profile with when it was merged, each with its keys in the keyspaces open to the API. A standalone profile answers itself alone. A key restricted to some sections may not read it, as a cluster joins the data of every section.',
      errors: wholeProfile,
      params: ProfileParams,
      response: { 200: MergeCluster },
      scope,
      handle: ({ db, scope, params }) => profiles.getMergeCluster(db, scope, params),
    }),
    operation({
      method: 'PUT',
      path: base,
      summary: 'Switch a unique identifier',
      description:
        'Moves a unique identifier (a key attribute such as an email address) of a section from one profile to another.',
      errors: [...wholeProfile, ...SECTION_PROBLEMS, ...READ_ONLY_PROBLEMS, 'AUD-1221', 'AUD-1222', 'AUD-1223'],
      params: ProfileSectionParams,
      body: Switch,
      response: { 204: NoContent },
      scope,
      transaction: true,
      handle: ({ db, scope, params, body }) => profiles.switchIdentifier(db, scope, params, body),
    }),
    operation({
      method: 'GET',
      path: `${base}/tags`,
      summary: 'Tags of a profile',
      examples: {
        response: {
          200: { 'com.vendor1.tags.user-created.vip': true, 'com.vendor1.tags.user-created.newsletter-reader': true },
        },
      },
      description: 'The tags a profile carries in a section, as a map of tag discriminator to `true`.',
      errors: sectionRead,
      params: ProfileSectionParams,
      response: { 200: TagValues },
      scope,
      handle: ({ db, scope, params }) => attributes.getTags(db, scope, params),
    }),
    operation({
      method: 'PATCH',
      path: `${base}/tags`,
      summary: 'Set and remove tags',
      examples: {
        body: { 'com.vendor1.tags.user-created.vip': true, 'com.vendor1.tags.user-created.first-order': null },
      },
      description:
        "A JSON merge patch of the profile's tags: `true` sets a tag, `false` removes it; any other value, `null` included, is refused (400 AUD-1209). The profile must exist (404 otherwise). At most 100 KB; every tag must be defined in the section and writable through the keyspace.",
      errors: [...sectionWrite, 'AUD-1218', 'AUD-1209', ...WRITE_GRANT_PROBLEMS],
      params: ProfileSectionParams,
      body: MergePatch,
      response: { 204: NoContent },
      scope,
      transaction: true,
      bodyTooLarge,
      handle: ({ db, scope, params, body }) => attributes.patchTags(db, scope, params, body),
    }),
    operation({
      method: 'GET',
      path: `${base}/attributes`,
      summary: 'Attributes of a profile',
      examples: {
        response: {
          200: { '3f6a1c2e-8b4d-4e5f-9a0b-1c2d3e4f5a6b': 'Hamburg', '9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d': 1520.5 },
        },
      },
      description:
        'The attribute values of a profile in a section, keyed by attribute version id. Hidden attributes are left out.',
      errors: sectionRead,
      params: ProfileSectionParams,
      response: { 200: AttributeValues },
      scope,
      handle: ({ db, scope, params }) => attributes.getAttributes(db, scope, params),
    }),
    operation({
      method: 'GET',
      path: `${base}/attributes/history`,
      summary: 'Attribute history of a profile',
      examples: {
        response: {
          200: {
            items: [
              {
                version_id: '3f6a1c2e-8b4d-4e5f-9a0b-1c2d3e4f5a6b',
                attribute_discriminator: 'com.vendor1.attributes.user-created.city',
                current: { value: 'Hamburg', set_at: '2026-03-01T09:30:00.000Z' },
                past: [
                  { value: 'Bremen', set_at: '2025-11-12T16:02:11.000Z', replaced_at: '2026-03-01T09:30:00.000Z' },
                ],
                past_total: 1,
              },
            ],
          },
        },
      },
      description:
        'Per attribute of a profile in a section, the value it shows now with the time it was set, and the values it had before with the times each was set and replaced, newest first (at most `limit` per attribute; `past_total` counts them all). Exactly the attributes the attributes GET answers: hidden ones and those the keyspace may not read are left out. A merged profile answers the history of its cluster, as it answers its values.',
      errors: sectionRead,
      params: ProfileSectionParams,
      query: HistoryQuery,
      response: { 200: AttributeHistory },
      scope,
      handle: ({ db, scope, params, query }) => attributes.getAttributeHistory(db, scope, params, query.limit),
    }),
    // The attribute PATCHes take the pool: they open a transaction only when a write needs one (docs/architecture.md).
    operation({
      method: 'PATCH',
      path: `${base}/attributes`,
      summary: 'Set attributes (version 1)',
      examples: {
        body: { '3f6a1c2e-8b4d-4e5f-9a0b-1c2d3e4f5a6b': 'Hamburg', '9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d': 1520.5 },
      },
      description:
        "A JSON merge patch of attribute values keyed by attribute version id: a value sets the attribute, `null` clears it. Creates the profile when it does not exist. Each value must conform to its version's type; at most 100 KB.",
      errors: [
        ...SECTION_PROBLEMS,
        ...IDENTIFIER_PROBLEMS,
        'AUD-1202',
        ...READ_ONLY_PROBLEMS,
        'AUD-1204',
        ...ENTRY_PROBLEMS,
      ],
      params: ProfileSectionParams,
      body: MergePatch,
      response: { 204: NoContent },
      scope,
      bodyTooLarge,
      handle: ({ services, scope, params, body }) => attributes.patchAttributesV1(services.pool, scope, params, body),
    }),
    operation({
      method: 'PATCH',
      path: `/v2${base}/attributes`,
      summary: 'Set attributes (version 2)',
      examples: {
        body: {
          'com.vendor1.attributes.user-created.city': 'Hamburg',
          'com.vendor1.attributes.user-created.loyalty-points': 1520.5,
          'com.vendor1.attributes.user-created.birthday': null,
        },
      },
      description:
        "A JSON merge patch of attribute values keyed by attribute discriminator; each value is written to the attribute's current version. Changing a key attribute needs `profile_key_update_method`. Each value must conform to its type; at most 100 KB.",
      errors: [...sectionWrite, ...ENTRY_PROBLEMS, ...ALL_SECTIONS_PROBLEMS, 'AUD-1212', 'AUD-1213', 'AUD-1216'],
      params: ProfileSectionParams,
      query: KeyUpdateQuery,
      body: MergePatch,
      response: { 204: NoContent },
      scope,
      bodyTooLarge,
      handle: ({ services, scope, params, query, body }) =>
        attributes.patchAttributesV2(
          services.pool,
          scope,
          params,
          body,
          query.profile_key_update_method,
          activitiesFollowProfiles,
        ),
    }),
    operation({
      method: 'DELETE',
      path: `${base}/attributes/:version_id`,
      summary: 'Clear an attribute version',
      description: 'Clears the value of one attribute version of a profile.',
      errors: [...sectionWrite, ...CLEAR_PROBLEMS],
      params: VersionParams,
      response: { 204: NoContent },
      scope,
      transaction: true,
      handle: ({ db, scope, params }) => attributes.clearAttributeVersion(db, scope, params, params.version_id),
    }),
    operation({
      method: 'DELETE',
      path: `/v2${base}/attributes/:attribute_discriminator`,
      summary: 'Clear every version of an attribute',
      description: 'Clears the values of every version of an attribute of a profile.',
      errors: [...sectionWrite, ...CLEAR_PROBLEMS, 'AUD-1212'],
      params: AttributeParams,
      response: { 204: NoContent },
      scope,
      transaction: true,
      handle: ({ db, scope, params }) => attributes.clearAttribute(db, scope, params, params.attribute_discriminator),
    }),
    operation({
      method: 'GET',
      path: `${base}/events`,
      summary: 'Events of a profile',
      description:
        'The events of a profile in a section, newest first, optionally of some event versions only (`event_version_ids`, comma-separated or repeated). The answer is truncated above 300 KB.',
      errors: sectionRead,
      params: ProfileSectionParams,
      query: EventsQuery,
      response: { 200: Events },
      scope,
      handle: ({ db, scope, params, query }) => events.listEvents(db, scope, params, query.event_version_ids),
    }),
    operation({
      method: 'POST',
      path: `${base}/events`,
      summary: 'Add events',
      examples: {
        body: {
          items: [
            {
              event_time: '2026-03-01T09:30:00Z',
              version_id: 'e1d2c3b4-a5f6-4e7d-8c9b-0a1f2e3d4c5b',
              data: { url: 'https://shop.example/products/4711', title: 'Rain jacket', device: 'mobile' },
            },
          ],
        },
      },
      description:
        "Records up to 100 events of a profile: each names its event version (not deprecated, writable through the keyspace), its time and its data, whose fields must be those of the version's type and conform to it. The profile must exist (404 otherwise).",
      errors: [...sectionWrite, 'AUD-1207', 'AUD-1209', 'AUD-1219', 'AUD-1220', 'AUD-1402', ...WRITE_GRANT_PROBLEMS],
      params: ProfileSectionParams,
      body: NewEvents,
      response: { 204: NoContent },
      scope,
      transaction: true,
      bodyTooLarge,
      handle: ({ db, scope, params, body }) => events.addEvents(db, scope, params, body.items),
    }),
    operation({
      method: 'GET',
      path: '/audience/sections/:section_discriminator/profiles',
      summary: "List a section's profiles",
      description:
        "The service's own route (its console browses profiles with it): the canonical profiles with data in the section, most recently updated first, a page at a time (`next_cursor`), with their keys and the values they show by attribute discriminator. `keyspace` and `key_prefix` keep the profiles with a key there that starts so; `attribute` and `value` those whose value of the attribute (its current version, not hidden) equals the value, read as the attribute's type.",
      errors: [...SECTION_PROBLEMS, 'AUD-0', 'AUD-1003'],
      params: SectionParams,
      query: ProfileListQuery,
      response: { 200: ProfileList },
      scope,
      handle: ({ db, scope, params, query }) => browse.listProfiles(db, scope, params.section_discriminator, query),
    }),
    operation({
      method: 'GET',
      path: '/audience/sections/:section_discriminator/profiles/growth',
      summary: "A section's profiles per day",
      description:
        "The service's own route (its console's overview charts it): for each of the last `days` UTC days, today last, the section's profiles created that day and all of them at its end. Deleted profiles are counted on no day; a merge cluster counts once, on its canonical profile's day.",
      errors: [...SECTION_PROBLEMS],
      params: SectionParams,
      query: GrowthQuery,
      response: { 200: Growth },
      scope,
      handle: ({ db, scope, params, query }) =>
        browse.profileGrowth(db, scope, params.section_discriminator, query.days),
    }),
  ],
};
