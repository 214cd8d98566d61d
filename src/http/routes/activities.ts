import { Type, type TSchema } from 'typebox';
import type { Services } from '../../services.ts';
import * as activities from '../../activities/activities.ts';
import { ACTIVITY_KIND_TABLE } from '../../activities/kinds.ts';
import { recordActivityEvents } from '../../activities/events.ts';
import { checkActivityTemplates } from '../../transactional/sends.ts';
import {
  ACTIVITY_KINDS,
  Activity,
  ActivityEventBatch,
  ActivityEventsQuery,
  ActivityEventView,
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
  Timeline,
  TimelineQuery,
  WebsiteActivity,
  type ActivityKindName,
} from '../../activities/schemas.ts';
import { Problem } from '../../core/problems.ts';
import { answer, operation, type OperationTable } from '../operation.ts';
import { AccountId, AccountParams, Items, SectionParams } from '../schemas/common.ts';
import { NoContent } from '../schemas/problem.ts';
import { SECTION_PROBLEMS } from '../../definitions/definitions.ts';
import { IDENTIFIER_PROBLEMS, READ_ONLY_PROBLEMS } from '../../profiles/locate.ts';

/** The public path of each kind, its name in summaries, and the shapes of its list items and single answers (SPEC §2.14, §4.8). */
const KINDS: Record<ActivityKindName, { path: string; item: TSchema; single: TSchema; name: string }> = {
  email: { path: '/emails', item: EmailActivityItem, single: EmailActivity, name: 'email' },
  sms: { path: '/sms', item: SmsActivityItem, single: SmsActivity, name: 'SMS' },
  website: { path: '/website', item: WebsiteActivity, single: WebsiteActivity, name: 'website' },
  'marketing-automation': {
    path: '/marketing-automation',
    item: AutomationActivity,
    single: AutomationActivity,
    name: 'marketing automation',
  },
  'forms-and-pages': {
    path: '/forms-and-pages',
    item: FormActivityItem,
    single: FormActivity,
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

/** Counts an ingestion's events by outcome, for /metrics. */
function countIngested(services: Services, result: IngestionResult) {
  const events = services.metrics.activityEvents;
  events.inc({ outcome: 'recorded' }, result.recorded);
  events.inc({ outcome: 'duplicate' }, result.duplicates);
  events.inc({ outcome: 'skipped' }, result.skipped.length);
}

/** What an activity's writes need besides the scope. */
const writerOf = (services: Services) => ({
  feed: services.feed,
  vendor: services.config.vendor,
  checkEmail: checkActivityTemplates,
});

/** The public reads of one kind's activities (SPEC §4.8). */
function kindOperations(kind: ActivityKindName) {
  const { path, item, single, name } = KINDS[kind];
  const { triggers, events } = ACTIVITY_KIND_TABLE[kind];
  const statistics = ACTIVITY_KIND_TABLE[kind].statistics !== undefined;
  const querystring = statistics ? StatisticsQuery : triggers ? TriggerQuery : Type.Object({});
  return [
    operation({
      method: 'GET',
      path: `${path}/sections/:section_discriminator/activities`,
      summary: `List ${name} activities`,
      description: `The 500 most recent ${name} activities of a section, newest first; archived ones are left out.${statistics ? ' With `include_statistics`, each with its counts of sends, opens, clicks and the rest.' : ''}`,
      errors: [...SECTION_PROBLEMS, ...(triggers ? (['AUD-2004'] as const) : [])],
      params: SectionParams,
      query: querystring as TSchema,
      response: { 200: Items(item, `${name} activities`) },
      scope: 'account',
      handle: async ({ db, scope, params, query }) => {
        const { include_statistics, trigger_types } = query as {
          include_statistics?: boolean;
          trigger_types?: string[];
        };
        const read = {
          section_discriminator: params.section_discriminator,
          include_statistics,
          api_triggered_only: apiTriggeredOnly(trigger_types),
        };
        return { items: await activities.listActivities(db, scope, kind, read) };
      },
    }),
    operation({
      method: 'GET',
      path: `${path}/sections/:section_discriminator/activities/:activity_id`,
      summary: `Get a ${name} activity`,
      description: `One ${name} activity of a section${statistics ? ', optionally with its statistics (`include_statistics`)' : ''}.`,
      errors: ['AUD-1102', 'AUD-1107', 'AUD-2001'],
      params: ActivityParams,
      query: (statistics ? StatisticsQuery : Type.Object({})) as TSchema,
      response: { 200: single },
      scope: 'account',
      handle: ({ db, scope, services, params, query }) =>
        activities.readActivity(db, scope, services.config.vendor, kind, {
          ...params,
          include_statistics: (query as { include_statistics?: boolean }).include_statistics,
        }),
    }),
    // The service's own reads, for its console: an activity's events over time, and its events (a message's).
    ...(!events
      ? []
      : [
          operation({
            method: 'GET',
            path: `${path}/sections/:section_discriminator/activities/:activity_id/timeline`,
            summary: `Events of a ${name} activity over time`,
            description: `The service's own read (for its console): the activity's events counted by type per hour or day (UTC), 0 where there were none.`,
            errors: ['AUD-1102', 'AUD-1107', 'AUD-2001'],
            params: ActivityParams,
            query: TimelineQuery,
            response: { 200: Timeline },
            scope: 'account',
            handle: ({ db, scope, params, query }) =>
              activities.activityTimeline(db, scope, kind, { ...params, ...query }),
          }),
          operation({
            method: 'GET',
            path: `${path}/sections/:section_discriminator/activities/:activity_id/events`,
            summary: `Events of a ${name} activity`,
            description: `The service's own read (for its console): the activity's newest events, or those of one message by its correlation id.`,
            errors: ['AUD-1102', 'AUD-1107', 'AUD-2001'],
            params: ActivityParams,
            query: ActivityEventsQuery,
            response: { 200: Items(ActivityEventView, 'Events, newest first') },
            scope: 'account',
            handle: async ({ db, scope, params, query }) => ({
              items: await activities.activityEvents(db, scope, kind, { ...params, ...query }),
            }),
          }),
        ]),
  ];
}

const operator = ['operator'];

/** Activities: the public reads of SPEC §4.8, and the operator's writes and event ingestion (docs/activities.md). */
export const activitiesRoutes: OperationTable = {
  tags: ['activities'],
  operations: [
    ...ACTIVITY_KINDS.flatMap(kindOperations),
    operation({
      method: 'GET',
      path: '/admin/accounts/:account_id/activities',
      tags: operator,
      summary: 'List every activity',
      description:
        'Every activity of an account, archived ones included, newest first, optionally of one section or kind.',
      errors: ['AUD-1102'],
      params: AccountParams,
      query: Type.Object(
        {
          section_discriminator: Type.Optional(Type.String()),
          kind: Type.Optional(Type.Enum(ACTIVITY_KINDS)),
        },
        { additionalProperties: false },
      ),
      response: { 200: Items(Activity, 'Activities') },
      scope: 'operator-account',
      handle: async ({ db, scope, query }) => ({ items: await activities.listAllActivities(db, scope, query) }),
    }),
    operation({
      method: 'POST',
      path: '/admin/accounts/:account_id/activities',
      bodyLimit: 10 * 1024 * 1024,
      tags: operator,
      summary: 'Create an activity',
      description:
        'Creates an activity (an email, SMS, website, automation or forms activity); the service gives its id.',
      errors: ['AUD-1102', 'AUD-2005', 'AUD-2006', 'AUD-2101'],
      params: AccountParams,
      body: ActivityInput,
      response: { 201: Activity },
      scope: 'operator-account',
      transaction: true,
      handle: async ({ db, scope, services, body }) =>
        (await activities.putActivity(db, scope, writerOf(services), undefined, body)).activity,
    }),
    operation({
      method: 'PUT',
      path: '/admin/accounts/:account_id/activities/:activity_id',
      bodyLimit: 10 * 1024 * 1024,
      tags: operator,
      summary: 'Create or change an activity',
      description: 'Creates (201) or changes (200) the activity with this id. Its kind and section cannot change.',
      errors: ['AUD-1102', 'AUD-2002', 'AUD-2005', 'AUD-2006', 'AUD-2101'],
      params: AdminActivityParams,
      body: ActivityInput,
      response: { 200: Activity, 201: Activity },
      scope: 'operator-account',
      transaction: true,
      handle: async ({ db, scope, services, params, body }) => {
        const { activity, created } = await activities.putActivity(
          db,
          scope,
          writerOf(services),
          params.activity_id,
          body,
        );
        return answer(created ? 201 : 200, activity);
      },
    }),
    operation({
      method: 'GET',
      path: '/admin/accounts/:account_id/activities/:activity_id',
      tags: operator,
      summary: 'Get an activity',
      description: 'One activity with every field, archived or not.',
      errors: ['AUD-2001'],
      params: AdminActivityParams,
      response: { 200: Activity },
      scope: 'operator-account',
      handle: ({ db, scope, params }) => activities.getActivityById(db, scope, params.activity_id),
    }),
    operation({
      method: 'DELETE',
      path: '/admin/accounts/:account_id/activities/:activity_id',
      tags: operator,
      summary: 'Archive an activity',
      description: 'Archives an activity: it leaves the public routes and takes no more events; its statistics stay.',
      errors: ['AUD-2001'],
      params: AdminActivityParams,
      response: { 204: NoContent },
      scope: 'operator-account',
      transaction: true,
      handle: ({ db, scope, params }) => activities.archiveActivity(db, scope, params.activity_id),
    }),
    operation({
      method: 'POST',
      path: '/admin/accounts/:account_id/activity-events',
      bodyLimit: EVENTS_BODY_LIMIT,
      // A JSON array, or JSON lines (application/x-ndjson), is the list of items.
      preValidation: async (request) => {
        if (Array.isArray(request.body)) request.body = { items: request.body };
      },
      tags: operator,
      summary: 'Record activity events',
      description:
        'Records events of activities (sent, delivered, opened, clicked …): a JSON array, `{"items": [...]}` or JSON lines. Idempotent per activity, type and correlation id.',
      errors: [...IDENTIFIER_PROBLEMS, ...READ_ONLY_PROBLEMS, 'AUD-2003'],
      params: AccountParams,
      body: ActivityEventBatch,
      response: { 200: IngestionResult },
      scope: 'operator-account',
      transaction: true,
      handle: ({ db, scope, services, body }) => recordActivityEvents(db, scope, services.config.vendor, body.items),
      // Counted once the events are committed.
      committed: (result, services) => countIngested(services, result as IngestionResult),
    }),
  ],
};
