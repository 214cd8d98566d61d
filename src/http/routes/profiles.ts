import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Services } from '../../services.ts';
import { activitiesFollowProfiles } from '../../activities/events.ts';
import type { AccountScope } from '../../core/scope.ts';
import * as attributes from '../../profiles/attributes.ts';
import * as events from '../../profiles/events.ts';
import * as profiles from '../../profiles/profiles.ts';
import {
  AttributeParams,
  AttributeValues,
  CreateProfile,
  CreateProfileParams,
  Events,
  EventsQuery,
  KeyUpdateQuery,
  Merge,
  MergePatch,
  NewEvents,
  ProfileParams,
  ProfileSectionParams,
  Switch,
  TagValues,
  UniqueIdentifier,
  VersionParams,
} from '../../profiles/schemas.ts';
import { withTransaction } from '../../store/pool.ts';
import type { ScopeOf } from '../plugins/profile-data.ts';
import { NoContent, responses } from '../schemas/problem.ts';

/** Profiles (SPEC §4.3 and §4.4) on the routes of ENDPOINTS.md "Profiles". */
export function profilesRoutes(services: Services, scopeOf: ScopeOf) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const tags = ['profiles'];
    const updates = { bodyTooLarge: 'AUD-1210' as const };

    const write = <T>(
      request: FastifyRequest,
      work: (tx: Parameters<Parameters<typeof withTransaction>[1]>[0], scope: AccountScope) => Promise<T>,
    ) => scopeOf(request).then((scope) => withTransaction(services.pool, (tx) => work(tx, scope)));

    app.post(
      '/audience/keyspaces/:keyspace_discriminator/sections/:section_discriminator/profiles',
      {
        schema: {
          summary: 'Create a profile',
          tags,
          params: CreateProfileParams,
          body: CreateProfile,
          response: responses({ 201: UniqueIdentifier }),
        },
      },
      async (request, reply) => {
        const created = await write(request, (tx, scope) =>
          profiles.createProfile(tx, scope, { ...request.params, profile_key: request.body.profile_key }),
        );
        return reply.code(201).send(created);
      },
    );

    app.put(
      '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/locks',
      {
        schema: {
          summary: 'Lock a profile for good',
          tags,
          params: ProfileParams,
          response: responses({ 204: NoContent }),
        },
      },
      async (request, reply) => {
        await write(request, (tx, scope) => profiles.lockProfile(tx, scope, request.params, activitiesFollowProfiles));
        return reply.code(204).send();
      },
    );

    app.delete(
      '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key',
      {
        schema: { summary: 'Delete a profile', tags, params: ProfileParams, response: responses({ 204: NoContent }) },
      },
      async (request, reply) => {
        await write(request, (tx, scope) =>
          profiles.deleteProfile(tx, scope, request.params, activitiesFollowProfiles),
        );
        return reply.code(204).send();
      },
    );

    app.put(
      '/audience/profiles/merges',
      {
        schema: { summary: 'Merge two profiles', tags, body: Merge, response: responses({ 204: NoContent }) },
      },
      async (request, reply) => {
        await write(request, (tx, scope) =>
          profiles.mergeProfiles(tx, scope, request.body.profiles, activitiesFollowProfiles),
        );
        return reply.code(204).send();
      },
    );

    app.delete(
      '/audience/profiles/merges/keyspaces/:keyspace_discriminator/profiles/:profile_key',
      {
        schema: {
          summary: 'Unmerge a profile from its cluster',
          tags,
          params: ProfileParams,
          response: responses({ 204: NoContent }),
        },
      },
      async (request, reply) => {
        await write(request, (tx, scope) =>
          profiles.unmergeProfile(tx, scope, request.params, activitiesFollowProfiles),
        );
        return reply.code(204).send();
      },
    );

    app.put(
      '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/sections/:section_discriminator',
      {
        schema: {
          summary: 'Switch a unique identifier',
          tags,
          params: ProfileSectionParams,
          body: Switch,
          response: responses({ 204: NoContent }),
        },
      },
      async (request, reply) => {
        await write(request, (tx, scope) => profiles.switchIdentifier(tx, scope, request.params, request.body));
        return reply.code(204).send();
      },
    );

    const base = '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/sections/:section_discriminator';

    app.get(
      `${base}/tags`,
      {
        schema: {
          summary: 'Tags of a profile',
          tags,
          params: ProfileSectionParams,
          response: responses({ 200: TagValues }),
        },
      },
      async (request) => {
        return attributes.getTags(services.pool, await scopeOf(request), request.params);
      },
    );

    app.patch(
      `${base}/tags`,
      {
        config: updates,
        schema: {
          summary: 'Set and remove tags',
          tags,
          params: ProfileSectionParams,
          body: MergePatch,
          response: responses({ 204: NoContent }),
        },
      },
      async (request, reply) => {
        await write(request, (tx, scope) => attributes.patchTags(tx, scope, request.params, request.body));
        return reply.code(204).send();
      },
    );

    app.get(
      `${base}/attributes`,
      {
        schema: {
          summary: 'Attributes of a profile',
          tags,
          params: ProfileSectionParams,
          response: responses({ 200: AttributeValues }),
        },
      },
      async (request) => {
        return attributes.getAttributes(services.pool, await scopeOf(request), request.params);
      },
    );

    app.patch(
      `${base}/attributes`,
      {
        config: updates,
        schema: {
          summary: 'Set attributes (version 1: keys are version ids; creates the profile)',
          tags,
          params: ProfileSectionParams,
          body: MergePatch,
          response: responses({ 204: NoContent }),
        },
      },
      async (request, reply) => {
        await attributes.patchAttributesV1(services.pool, await scopeOf(request), request.params, request.body);
        return reply.code(204).send();
      },
    );

    app.patch(
      `/v2${base}/attributes`,
      {
        config: updates,
        schema: {
          summary: 'Set attributes (version 2: keys are discriminators)',
          tags,
          params: ProfileSectionParams,
          querystring: KeyUpdateQuery,
          body: MergePatch,
          response: responses({ 204: NoContent }),
        },
      },
      async (request, reply) => {
        await attributes.patchAttributesV2(
          services.pool,
          await scopeOf(request),
          request.params,
          request.body,
          request.query.profile_key_update_method,
          activitiesFollowProfiles,
        );
        return reply.code(204).send();
      },
    );

    app.delete(
      `${base}/attributes/:version_id`,
      {
        schema: {
          summary: 'Clear an attribute version',
          tags,
          params: VersionParams,
          response: responses({ 204: NoContent }),
        },
      },
      async (request, reply) => {
        await write(request, (tx, scope) =>
          attributes.clearAttributeVersion(tx, scope, request.params, request.params.version_id),
        );
        return reply.code(204).send();
      },
    );

    app.delete(
      `/v2${base}/attributes/:attribute_discriminator`,
      {
        schema: {
          summary: 'Clear every version of an attribute',
          tags,
          params: AttributeParams,
          response: responses({ 204: NoContent }),
        },
      },
      async (request, reply) => {
        await write(request, (tx, scope) =>
          attributes.clearAttribute(tx, scope, request.params, request.params.attribute_discriminator),
        );
        return reply.code(204).send();
      },
    );

    app.get(
      `${base}/events`,
      {
        schema: {
          summary: 'Events of a profile',
          tags,
          params: ProfileSectionParams,
          querystring: EventsQuery,
          response: responses({ 200: Events }),
        },
      },
      async (request) => {
        return events.listEvents(
          services.pool,
          await scopeOf(request),
          request.params,
          request.query.event_version_ids,
        );
      },
    );

    app.post(
      `${base}/events`,
      {
        config: updates,
        schema: {
          summary: 'Add events',
          tags,
          params: ProfileSectionParams,
          body: NewEvents,
          response: responses({ 204: NoContent }),
        },
      },
      async (request, reply) => {
        await write(request, (tx, scope) => events.addEvents(tx, scope, request.params, request.body.items));
        return reply.code(204).send();
      },
    );
  };
}
