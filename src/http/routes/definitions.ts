import type { FastifyInstance } from 'fastify';
import type { Caller } from '../../core/scope.ts';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountScope, type Services } from '../../services.ts';
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
import { withTransaction } from '../../store/pool.ts';
import { Items, PermissionsQuery, SectionParams } from '../schemas/common.ts';
import { responses } from '../schemas/problem.ts';

const TagParams = Type.Object({
  section_discriminator: Type.String(),
  tag_discriminator: Type.String({ description: 'Tag discriminator' }),
});
const SegmentParams = Type.Object({ segment_discriminator: Type.String({ description: 'Segment discriminator' }) });
const SegmentVersionParams = Type.Object({
  segment_discriminator: Type.String(),
  version_id: Type.String({ description: 'Segment version id' }),
});

/** The read side of SPEC §2.1–2.9 (§4.2), tag creation and tag rename. */
export function definitionsRoutes(services: Services) {
  const { vendor } = services.config;
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const defsOf = (accountId: string) => services.definitions.get(accountId);
    /** The section of a path, as the caller may see it. */
    const sectionFor = async (caller: Caller, discriminator: string) =>
      definitions.sectionOf({ defs: await defsOf(caller.accountId), caller }, discriminator);
    const tags = ['definitions'];

    app.get(
      '/audience/keyspaces',
      { schema: { summary: 'List keyspaces', tags, response: responses({ 200: Items(Keyspace, 'Keyspaces') }) } },
      async (request) => ({ items: definitions.listKeyspaces(await defsOf(request.caller.accountId)) }),
    );

    app.get(
      '/audience/channels',
      { schema: { summary: 'List channels', tags, response: responses({ 200: Items(Channel, 'Channels') }) } },
      async (request) => ({ items: definitions.listChannels(await defsOf(request.caller.accountId)) }),
    );

    app.get(
      '/audience/sections',
      { schema: { summary: 'List sections', tags, response: responses({ 200: Items(Section, 'Sections') }) } },
      async (request) => ({ items: definitions.listSections(await defsOf(request.caller.accountId), request.caller) }),
    );

    app.get(
      '/audience/sections/:section_discriminator/attributes',
      {
        schema: {
          summary: 'List attribute definitions',
          tags,
          params: SectionParams,
          querystring: PermissionsQuery,
          response: responses({ 200: Items(AttributeDefinition, 'Attribute definitions') }),
        },
      },
      async (request) => {
        const section = await sectionFor(request.caller, request.params.section_discriminator);
        return { items: definitions.listAttributes(section, request.query) };
      },
    );

    app.get(
      '/audience/sections/:section_discriminator/tags',
      {
        schema: {
          summary: 'List tags',
          tags,
          params: SectionParams,
          querystring: PermissionsQuery,
          response: responses({ 200: Items(Tag, 'Tags') }),
        },
      },
      async (request) => {
        const section = await sectionFor(request.caller, request.params.section_discriminator);
        return { items: definitions.listTags(section, request.query) };
      },
    );

    app.post(
      '/audience/sections/:section_discriminator/tags',
      {
        schema: {
          summary: 'Create a tag',
          tags,
          params: SectionParams,
          body: TagName,
          response: responses({ 201: Tag }),
        },
      },
      async (request, reply) => {
        const scope = await accountScope(services, request.caller.accountId, request.caller);
        const tag = await withTransaction(services.pool, (tx) =>
          definitions.createTag(tx, scope, { feed: services.feed, vendor }, { ...request.params, ...request.body }),
        );
        return reply.code(201).send(tag);
      },
    );

    app.get(
      '/audience/sections/:section_discriminator/tags/:tag_discriminator',
      {
        schema: {
          summary: 'Get a tag',
          tags,
          params: TagParams,
          querystring: PermissionsQuery,
          response: responses({ 200: Tag }),
        },
      },
      async (request) => {
        const section = await sectionFor(request.caller, request.params.section_discriminator);
        return definitions.getTag(section, request.params.tag_discriminator, request.query);
      },
    );

    app.put(
      '/audience/sections/:section_discriminator/tags/:tag_discriminator',
      {
        schema: { summary: 'Rename a tag', tags, params: TagParams, body: TagName, response: responses({ 200: Tag }) },
      },
      async (request) => {
        const scope = await accountScope(services, request.caller.accountId, request.caller);
        return withTransaction(services.pool, (tx) =>
          definitions.renameTag(tx, scope, services.feed, request.params, request.body.name),
        );
      },
    );

    app.get(
      '/audience/sections/:section_discriminator/events',
      {
        schema: {
          summary: 'List event definitions',
          tags,
          params: SectionParams,
          querystring: PermissionsQuery,
          response: responses({ 200: Items(EventDefinition, 'Event definitions') }),
        },
      },
      async (request) => {
        const section = await sectionFor(request.caller, request.params.section_discriminator);
        return { items: definitions.listEvents(section, request.query) };
      },
    );

    app.get(
      '/v2/audience/sections/:section_discriminator/topics',
      {
        schema: {
          summary: 'List topics',
          tags,
          params: SectionParams,
          response: responses({ 200: Items(Topic, 'Topics') }),
        },
      },
      async (request) => {
        const section = await sectionFor(request.caller, request.params.section_discriminator);
        return { items: definitions.listTopics(section, vendor) };
      },
    );

    app.get(
      '/folders/topic/sections/:section_discriminator/folders',
      {
        schema: { summary: 'Topic folder tree', tags, params: SectionParams, response: responses({ 200: FolderTree }) },
      },
      async (request) => {
        const section = await sectionFor(request.caller, request.params.section_discriminator);
        return definitions.topicFolderTree(section, vendor);
      },
    );

    app.get(
      '/audience/segments',
      { schema: { summary: 'List segments', tags, response: responses({ 200: Items(Segment, 'Segments') }) } },
      async (request) => ({ items: definitions.listSegments(await defsOf(request.caller.accountId)) }),
    );

    app.get(
      '/audience/segments/:segment_discriminator',
      {
        schema: { summary: 'Get a segment', tags, params: SegmentParams, response: responses({ 200: Segment }) },
      },
      async (request) =>
        definitions.getSegment(await defsOf(request.caller.accountId), request.params.segment_discriminator),
    );

    app.get(
      '/audience/segments/:segment_discriminator/versions/:version_id',
      {
        schema: {
          summary: 'Get a segment version',
          tags,
          params: SegmentVersionParams,
          response: responses({ 200: SegmentVersion }),
        },
      },
      async (request) =>
        definitions.getSegmentVersion(
          await defsOf(request.caller.accountId),
          request.params.segment_discriminator,
          request.params.version_id,
        ),
    );
  };
}
