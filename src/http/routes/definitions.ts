import { Type } from 'typebox';
import * as definitions from '../../definitions/definitions.ts';
import {
  AttributeDefinition,
  Channel,
  EventDefinition,
  FolderTree,
  Keyspace,
  Section,
  Segment,
  SegmentVersion,
  Tag,
  TagName,
  Topic,
} from '../../definitions/schemas.ts';
import { operation, type OperationTable } from '../operation.ts';
import { Items, PermissionsQuery, SectionParams } from '../schemas/common.ts';
import { AQL_PROBLEMS } from '../../aql/errors.ts';

const TagParams = Type.Object({
  section_discriminator: Type.String(),
  tag_discriminator: Type.String({ description: 'Tag discriminator' }),
});
const SegmentParams = Type.Object({ segment_discriminator: Type.String({ description: 'Segment discriminator' }) });
const SegmentVersionParams = Type.Object({
  segment_discriminator: Type.String(),
  version_id: Type.String({ description: 'Segment version id' }),
});
const scope = 'account';

/** The read side of SPEC §2.1–2.9 (§4.2), tag creation and tag rename. */
export const definitionsRoutes: OperationTable = {
  tags: ['definitions'],
  operations: [
    operation({
      method: 'GET',
      path: '/audience/keyspaces',
      summary: 'List keyspaces',
      description:
        "The keyspaces of the account: the kinds of profile keys (a shop's customer id, an email address) profiles are found by. With `include_keyspace_permissions`, what the caller's key may do in each.",
      response: { 200: Items(Keyspace, 'Keyspaces') },
      scope,
      handle: async ({ scope }) => ({ items: definitions.listKeyspaces(scope.defs) }),
    }),
    operation({
      method: 'GET',
      path: '/audience/channels',
      summary: 'List channels',
      description: 'The channels of the account (email, SMS …), whose addresses consents are given for.',
      response: { 200: Items(Channel, 'Channels') },
      scope,
      handle: async ({ scope }) => ({ items: definitions.listChannels(scope.defs) }),
    }),
    operation({
      method: 'GET',
      path: '/audience/sections',
      summary: 'List sections',
      description:
        "The sections the caller's API key may access: each holds its own attributes, tags, events and topics of profiles.",
      response: { 200: Items(Section, 'Sections') },
      scope,
      handle: async ({ scope, request }) => ({ items: definitions.listSections(scope.defs, request.caller) }),
    }),
    operation({
      method: 'GET',
      path: '/audience/sections/:section_discriminator/attributes',
      summary: 'List attribute definitions',
      description:
        'The attributes of a section, with their versions (each a type and an id) and whether a version is deprecated. Hidden attributes are left out.',
      errors: ['AUD-1102', 'AUD-1107'],
      params: SectionParams,
      query: PermissionsQuery,
      response: { 200: Items(AttributeDefinition, 'Attribute definitions') },
      scope,
      handle: async ({ scope, params, query }) => ({
        items: definitions.listAttributes(definitions.sectionOf(scope, params.section_discriminator), query),
      }),
    }),
    operation({
      method: 'GET',
      path: '/audience/sections/:section_discriminator/tags',
      summary: 'List tags',
      description: 'The tags defined in a section.',
      errors: ['AUD-1102', 'AUD-1107'],
      params: SectionParams,
      query: PermissionsQuery,
      response: { 200: Items(Tag, 'Tags') },
      scope,
      handle: async ({ scope, params, query }) => ({
        items: definitions.listTags(definitions.sectionOf(scope, params.section_discriminator), query),
      }),
    }),
    operation({
      method: 'POST',
      path: '/audience/sections/:section_discriminator/tags',
      summary: 'Create a tag',
      description:
        'Defines a tag in a section. A name the section has a tag of already makes another tag, its discriminator numbered; a section holds a limited number of tags.',
      errors: ['AUD-1102', 'AUD-1107', 'AUD-1108'],
      params: SectionParams,
      body: TagName,
      response: { 201: Tag },
      scope,
      transaction: true,
      handle: ({ db, scope, services, params, body }) =>
        definitions.createTag(
          db,
          scope,
          { feed: services.feed, vendor: services.config.vendor },
          { section_discriminator: params.section_discriminator, name: body.name },
        ),
    }),
    operation({
      method: 'GET',
      path: '/audience/sections/:section_discriminator/tags/:tag_discriminator',
      summary: 'Get a tag',
      description: 'One tag of a section, by its discriminator.',
      errors: ['AUD-1102', 'AUD-1103', 'AUD-1107'],
      params: TagParams,
      query: PermissionsQuery,
      response: { 200: Tag },
      scope,
      handle: async ({ scope, params, query }) =>
        definitions.getTag(definitions.sectionOf(scope, params.section_discriminator), params.tag_discriminator, query),
    }),
    operation({
      method: 'PUT',
      path: '/audience/sections/:section_discriminator/tags/:tag_discriminator',
      summary: 'Rename a tag',
      description: 'Changes the name of a tag; its discriminator, and so the profiles that carry it, stay.',
      errors: ['AUD-1102', 'AUD-1103', 'AUD-1107'],
      params: TagParams,
      body: TagName,
      response: { 200: Tag },
      scope,
      transaction: true,
      handle: ({ db, scope, services, params, body }) =>
        definitions.renameTag(db, scope, services.feed, params, body.name),
    }),
    operation({
      method: 'GET',
      path: '/audience/sections/:section_discriminator/events',
      summary: 'List event definitions',
      description: 'The event types of a section with their versions, whose ids `POST …/events` names.',
      errors: ['AUD-1102', 'AUD-1107'],
      params: SectionParams,
      query: PermissionsQuery,
      response: { 200: Items(EventDefinition, 'Event definitions') },
      scope,
      handle: async ({ scope, params, query }) => ({
        items: definitions.listEvents(definitions.sectionOf(scope, params.section_discriminator), query),
      }),
    }),
    operation({
      method: 'GET',
      path: '/v2/audience/sections/:section_discriminator/topics',
      summary: 'List topics',
      description: 'The consent topics of a section, with their channels and folders.',
      errors: ['AUD-1102', 'AUD-1107'],
      params: SectionParams,
      response: { 200: Items(Topic, 'Topics') },
      scope,
      handle: async ({ scope, services, params }) => ({
        items: definitions.listTopics(
          definitions.sectionOf(scope, params.section_discriminator),
          services.config.vendor,
        ),
      }),
    }),
    operation({
      method: 'GET',
      path: '/folders/topic/sections/:section_discriminator/folders',
      summary: 'Topic folder tree',
      description: "The folders of a section's topics as a tree, as consent management screens show them.",
      errors: ['AUD-1102', 'AUD-1107'],
      params: SectionParams,
      response: { 200: FolderTree },
      scope,
      handle: async ({ scope, services, params }) =>
        definitions.topicFolderTree(definitions.sectionOf(scope, params.section_discriminator), services.config.vendor),
    }),
    operation({
      method: 'GET',
      path: '/audience/segments',
      summary: 'List segments',
      description: 'The stored segments of the account, with their current version.',
      response: { 200: Items(Segment, 'Segments') },
      scope,
      handle: async ({ scope }) => ({ items: definitions.listSegments(scope.defs) }),
    }),
    operation({
      method: 'GET',
      path: '/audience/segments/:segment_discriminator',
      summary: 'Get a segment',
      description: 'One segment with its current version and its query.',
      errors: ['AUD-1104'],
      params: SegmentParams,
      response: { 200: Segment },
      scope,
      handle: async ({ scope, params }) => definitions.getSegment(scope.defs, params.segment_discriminator),
    }),
    operation({
      method: 'POST',
      path: '/audience/segments',
      summary: 'Create a segment',
      description:
        "The service's own route (its console creates segments with it): a segment with its first version, its discriminator made from its name (`-2`, `-3`… when taken); the query is checked as a count's is.",
      errors: [...AQL_PROBLEMS, 'AUD-1107'],
      body: Type.Object(
        {
          name: Type.String({ minLength: 1, maxLength: 255, description: 'Segment name, 1 to 255 characters' }),
          description: Type.Optional(Type.String({ maxLength: 1000, description: 'What the segment is for' })),
          query: Type.String({ minLength: 1, description: 'The AQL query of its first version, with numeric ids' }),
        },
        { additionalProperties: false },
      ),
      response: { 201: Segment },
      scope,
      transaction: true,
      handle: ({ db, scope, services, body }) =>
        definitions.createSegment(db, scope, { feed: services.feed, vendor: services.config.vendor }, body),
    }),
    operation({
      method: 'POST',
      path: '/audience/segments/:segment_discriminator/versions',
      summary: 'Save a segment version',
      description:
        "The service's own route (its console saves segments with it); the query is checked as a count's is.",
      errors: [...AQL_PROBLEMS, 'AUD-1104', 'AUD-1107'],
      params: SegmentParams,
      body: Type.Object(
        { query: Type.String({ minLength: 1, description: 'The AQL query, with numeric ids' }) },
        { additionalProperties: false },
      ),
      response: { 201: SegmentVersion },
      scope,
      transaction: true,
      handle: ({ db, scope, services, params, body }) =>
        definitions.addSegmentVersion(db, scope, services.feed, params.segment_discriminator, body.query),
    }),
    operation({
      method: 'GET',
      path: '/audience/segments/:segment_discriminator/versions/:version_id',
      summary: 'Get a segment version',
      description:
        'One version of a segment: segments keep every version of their query, and evaluations may name one.',
      errors: ['AUD-1104', 'AUD-1105'],
      params: SegmentVersionParams,
      response: { 200: SegmentVersion },
      scope,
      handle: async ({ scope, params }) =>
        definitions.getSegmentVersion(scope.defs, params.segment_discriminator, params.version_id),
    }),
  ],
};
