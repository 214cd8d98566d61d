import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type, type TSchema } from 'typebox';
import { accountScope, type Services } from '../../services.ts';
import { getAccount } from '../../accounts/accounts.ts';
import * as activities from '../../activities/activities.ts';
import { recordActivityEvents } from '../../activities/events.ts';
import { checkActivityTemplates } from '../../transactional/transactional.ts';
import {
  ACTIVITY_KINDS,
  Activity,
  ActivityEventBatch,
  ActivityId,
  ActivityInput,
  AutomationActivity,
  EmailActivity,
  EmailActivityItem,
  FormActivity,
  FormActivityItem,
  IngestionResult,
  SmsActivity,
  SmsActivityItem,
  WebsiteActivity,
  type ActivityKind,
} from '../../activities/schemas.ts';
import { Problem } from '../../core/problems.ts';
import { withTransaction } from '../../store/pool.ts';
import { Items, SectionParams } from '../schemas/common.ts';
import { NoContent, responses } from '../schemas/problem.ts';

/** The public path of each kind, and the shapes of its list items and single answers (SPEC §2.14, §4.8). */
const KINDS: Record<ActivityKind, { path: string; item: TSchema; single: TSchema; statistics: boolean; name: string }> =
  {
    email: { path: '/emails', item: EmailActivityItem, single: EmailActivity, statistics: true, name: 'email' },
    sms: { path: '/sms', item: SmsActivityItem, single: SmsActivity, statistics: true, name: 'SMS' },
    website: { path: '/website', item: WebsiteActivity, single: WebsiteActivity, statistics: false, name: 'website' },
    'marketing-automation': {
      path: '/marketing-automation',
      item: AutomationActivity,
      single: AutomationActivity,
      statistics: false,
      name: 'marketing automation',
    },
    'forms-and-pages': {
      path: '/forms-and-pages',
      item: FormActivityItem,
      single: FormActivity,
      statistics: false,
      name: 'forms and pages',
    },
  };

const StatisticsQuery = Type.Object({
  include_statistics: Type.Optional(
    Type.Boolean({ default: false, description: 'Add statistics to activities that have them calculated' }),
  ),
});
const TriggerQuery = Type.Object({
  trigger_types: Type.Optional(
    Type.Array(Type.String(), {
      description: 'Only api: automations triggered through the API; comma separated or repeated',
    }),
  ),
});
const ActivityParams = Type.Object({
  section_discriminator: Type.String(),
  activity_id: Type.String({ description: 'Activity id' }),
});

const AccountId = Type.String({ pattern: '^[0-9]{1,18}$', description: 'Account id' });
const AccountParams = Type.Object({ account_id: AccountId });
const AdminActivityParams = Type.Object({ account_id: AccountId, activity_id: ActivityId });

/** Events a request may carry: 100,000 events of about 300 bytes, with room. */
const EVENTS_BODY_LIMIT = 64 * 1024 * 1024;

/** Whether only API-triggered automations are wanted: `trigger_types` may only name api (ACT-13). */
function apiTriggeredOnly(values: string[] | undefined): boolean {
  const other = values?.find((v) => v !== 'api');
  if (other !== undefined)
    throw new Problem('AUD-2004', `The query parameter "trigger_types" accepts only api, not "${other}"`);
  return values !== undefined && values.length > 0;
}

/** Activities: the public reads of SPEC §4.8, and the operator's writes and event ingestion (docs/activities.md). */
export function activitiesRoutes(services: Services) {
  const { pool } = services;
  const { vendor } = services.config;
  const writer = { feed: services.feed, vendor, checkEmail: checkActivityTemplates };
  const countIngested = (result: IngestionResult) => {
    const events = services.metrics.activityEvents;
    events.inc({ outcome: 'recorded' }, result.recorded);
    events.inc({ outcome: 'duplicate' }, result.duplicates);
    events.inc({ outcome: 'skipped' }, result.skipped.length);
  };
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const tags = ['activities'];
    const scopeOf = (request: FastifyRequest) => accountScope(services, request.caller.accountId, request.caller);

    for (const kind of ACTIVITY_KINDS) {
      const { path, item, single, statistics, name } = KINDS[kind];
      const querystring = statistics
        ? StatisticsQuery
        : kind === 'marketing-automation'
          ? TriggerQuery
          : Type.Object({});
      app.get(
        `${path}/sections/:section_discriminator/activities`,
        {
          schema: {
            summary: `List the 500 most recent ${name} activities, newest first`,
            tags,
            params: SectionParams,
            querystring,
            response: responses({ 200: Items(item, `${name} activities`) }),
          },
        },
        async (request) => {
          const query = request.query as { include_statistics?: boolean; trigger_types?: string[] };
          const read = {
            section_discriminator: request.params.section_discriminator,
            include_statistics: query.include_statistics,
            api_triggered_only: apiTriggeredOnly(query.trigger_types),
          };
          return { items: await activities.listActivities(pool, await scopeOf(request), kind, read) };
        },
      );
      app.get(
        `${path}/sections/:section_discriminator/activities/:activity_id`,
        {
          schema: {
            summary: `Get a ${name} activity`,
            tags,
            params: ActivityParams,
            querystring: statistics ? StatisticsQuery : Type.Object({}),
            response: responses({ 200: single }),
          },
        },
        async (request) => {
          const query = request.query as { include_statistics?: boolean };
          return activities.readActivity(pool, await scopeOf(request), vendor, kind, {
            ...request.params,
            include_statistics: query.include_statistics,
          });
        },
      );
    }

    // ---- Operator API ----
    const config = { auth: 'admin' as const };
    const operator = ['operator'];
    const adminScope = async (accountId: string) => {
      await getAccount(pool, accountId);
      return accountScope(services, accountId);
    };

    app.get(
      '/admin/accounts/:account_id/activities',
      {
        config,
        schema: {
          tags: operator,
          summary: 'List every activity of an account, archived ones included, newest first',
          params: AccountParams,
          querystring: Type.Object(
            {
              section_discriminator: Type.Optional(Type.String()),
              kind: Type.Optional(Type.Enum(ACTIVITY_KINDS)),
            },
            { additionalProperties: false },
          ),
          response: responses({ 200: Items(Activity, 'Activities') }),
        },
      },
      async (request) => ({
        items: await activities.listAllActivities(pool, await adminScope(request.params.account_id), request.query),
      }),
    );

    app.post(
      '/admin/accounts/:account_id/activities',
      {
        config,
        bodyLimit: 10 * 1024 * 1024,
        schema: {
          tags: operator,
          summary: 'Create an activity; the service gives its id',
          params: AccountParams,
          body: ActivityInput,
          response: responses({ 201: Activity }),
        },
      },
      async (request, reply) => {
        const scope = await adminScope(request.params.account_id);
        const { activity } = await withTransaction(pool, (tx) =>
          activities.putActivity(tx, scope, writer, undefined, request.body),
        );
        return reply.code(201).send(activity);
      },
    );

    app.put(
      '/admin/accounts/:account_id/activities/:activity_id',
      {
        config,
        bodyLimit: 10 * 1024 * 1024,
        schema: {
          tags: operator,
          summary: 'Create (201) or change (200) the activity with this id',
          params: AdminActivityParams,
          body: ActivityInput,
          response: responses({ 200: Activity, 201: Activity }),
        },
      },
      async (request, reply) => {
        const scope = await adminScope(request.params.account_id);
        const { activity, created } = await withTransaction(pool, (tx) =>
          activities.putActivity(tx, scope, writer, request.params.activity_id, request.body),
        );
        return reply.code(created ? 201 : 200).send(activity);
      },
    );

    app.get(
      '/admin/accounts/:account_id/activities/:activity_id',
      {
        config,
        schema: {
          tags: operator,
          summary: 'Get an activity, with every field',
          params: AdminActivityParams,
          response: responses({ 200: Activity }),
        },
      },
      async (request) =>
        activities.getActivityById(pool, await adminScope(request.params.account_id), request.params.activity_id),
    );

    app.delete(
      '/admin/accounts/:account_id/activities/:activity_id',
      {
        config,
        schema: {
          tags: operator,
          summary: 'Archive an activity: it leaves the public routes and takes no more events',
          params: AdminActivityParams,
          response: responses({ 204: NoContent }),
        },
      },
      async (request, reply) => {
        const scope = await adminScope(request.params.account_id);
        await withTransaction(pool, (tx) => activities.archiveActivity(tx, scope, request.params.activity_id));
        return reply.code(204).send();
      },
    );

    app.post(
      '/admin/accounts/:account_id/activity-events',
      {
        config,
        bodyLimit: EVENTS_BODY_LIMIT,
        // A JSON array, or JSON lines (application/x-ndjson), is the list of items.
        preValidation: async (request) => {
          if (Array.isArray(request.body)) request.body = { items: request.body };
        },
        schema: {
          tags: operator,
          summary:
            'Record events of activities: a JSON array, {"items": [...]} or JSON lines; idempotent per activity, type and correlation id',
          params: AccountParams,
          body: ActivityEventBatch,
          response: responses({ 200: IngestionResult }),
        },
      },
      async (request) => {
        const scope = await adminScope(request.params.account_id);
        const result = await withTransaction(pool, (tx) => recordActivityEvents(tx, scope, vendor, request.body.items));
        countIngested(result);
        return result;
      },
    );
  };
}
