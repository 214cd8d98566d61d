import type { SwaggerOptions } from '@fastify/swagger';
import type { FastifySwaggerUiOptions } from '@fastify/swagger-ui';
import type { Config } from '../config.ts';
import { DEFAULT_LIMITS, LIMIT_RANGES } from '../core/limits.ts';
import { LISTED_VALUES } from '../core/schemas.ts';
import { FILE_MEDIA_TYPES } from './schemas/problem.ts';
import { WEBHOOK_EVENT_TYPES } from '../webhooks/events.ts';
import { payloadSchema } from '../webhooks/schemas.ts';

// The OpenAPI document as the reference at /docs shows it, shaped once from what the operations
// declare (src/http/operation.ts): examples where a media type has none, the problem document and
// every titled schema as a named component, the credentials of each part of the API, and tags
// grouped into the public API and the operator's.

type Json = Record<string, any>;

/** How long an access token lives, as the token route answers it (`expires_in`), in words. */
const TOKEN_LIFETIME = `${DEFAULT_LIMITS.token_lifetime_seconds / 3600} hours, unless the account's limits shorten it to no less than ${LIMIT_RANGES.token_lifetime_seconds!.minimum / 3600} hours`;

/** The tags of the public API, in the reference's order, with what each covers. */
const PUBLIC_TAGS: Record<string, string> = {
  auth: `Access tokens: exchange an API key (client id and secret) for a bearer token, valid for ${TOKEN_LIFETIME}.`,
  definitions:
    "The account's definitions: keyspaces, channels, sections with their attributes, tags, events and topics, segments. Read-only here; the operator changes them with a manifest.",
  profiles: 'Profiles of a keyspace and section: create, write attributes, tags and events, merge, lock and delete.',
  consents: 'Consents of profiles and addresses per topic and channel, opt-outs and subscriptions.',
  segments: 'Whether a profile is in segments, and how many profiles a segment holds over time.',
  imports: 'Bulk profile imports: request an import, upload its file with the signed form, poll its report.',
  exports: 'Exports and counts of profiles, consents and email events: request, poll, download the file.',
  activities: 'Email, SMS, website, automation and forms activities of a section, with their statistics.',
  'transactional email': 'Transactional email sent from templates of activities, and the status of each send.',
  webhooks:
    'Endpoints that receive signed events (Standard Webhooks): consents changed, profiles merged, unmerged or deleted, imports and exports finished; their deliveries and replays. The payloads are under `x-webhooks`.',
  errors: 'The closed table of error codes that problem documents name.',
};

/** The tags of the operator API. */
const OPERATOR_TAGS: Record<string, string> = {
  operator:
    'The operator API (`/admin`, the operator token): accounts, manifests, API keys, integrations, suppressions, activities, jobs, the outbox and webhooks.',
  operations: 'Health and readiness of the process, for load balancers and orchestrators.',
};

/** Realistic values by property or parameter name, for examples made from schemas. */
const VALUES: Record<string, unknown> = {
  secret: 'whsec_KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=',
  section_discriminator: 'com.vendor1.sections.user-created.shop',
  keyspace_discriminator: 'com.vendor1.integrations.keyspaces.5f2b9c1e.shop',
  channel_discriminator: 'com.vendor1.channels.email',
  tag_discriminator: 'com.vendor1.tags.user-created.vip',
  segment_discriminator: 'com.vendor1.segments.user-created.frequent-buyers',
  attribute_discriminator: 'com.vendor1.attributes.user-created.city',
  consent_list_discriminator: 'com.vendor1.folders.user-created.newsletters',
  topic_discriminator: 'com.vendor1.topics.user-created.weekly-newsletter',
  event_discriminator: 'com.vendor1.events.user-created.order-placed',
  discriminator: 'com.vendor1.sections.user-created.shop',
  profile_key: 'customer-4711',
  address: 'anna.berg@example.org',
  email: 'anna.berg@example.org',
  name: 'Shop',
  description: 'Customers of the online shop',
  account_id: '1042',
  client_id: 'k1042-3f9a8c2e',
  client_secret: 'q8Zr3vYp0wLk5N2sT7uB1xC4',
  grant_type: 'client_credentials',
  access_token: 'eyJhbGciOiJFUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJrMTA0Mi0zZjlhOGMyZSJ9.c2lnbmF0dXJl',
  token_type: 'Bearer',
  expires_in: 3600,
  version_id: '7d3c2a10-4f5e-4b6a-9c8d-1e2f3a4b5c6d',
  import_id: 'b4e1c2d3-5f6a-4b7c-8d9e-0a1b2c3d4e5f',
  report_id: 'c5f2d3e4-6a7b-4c8d-9e0f-1a2b3c4d5e6f',
  export_id: 'c5f2d3e4-6a7b-4c8d-9e0f-1a2b3c4d5e6f',
  activity_id: 'd6a3e4f5-7b8c-4d9e-8f0a-2b3c4d5e6f70',
  transaction_id: 'e7b4f5a6-8c9d-4e0f-9a1b-3c4d5e6f7081',
  message_id: 'f8c5a6b7-9d0e-4f1a-8b2c-4d5e6f708192',
  state: 'ready',
  url: 'https://cdp.shop.example/files/exports/c5f2d3e4.csv',
  callback_url: 'https://shop.example/hooks/audience-export',
  time_zone: 'Europe/Berlin',
  timezone: 'Europe/Berlin',
  field_selector: 'email',
  field_name: 'points',
  reason: 'Signed up at checkout',
  source: 'Shop checkout',
  message: 'The file has no column "email"',
  file_upload_url: 'https://cdp.shop.example/files/uploads',
  file_download_url: 'https://cdp.shop.example/audience/profiles/reports/c5f2d3e4-6a7b-4c8d-9e0f-1a2b3c4d5e6f',
  file_download_url_v2: 'https://cdp.shop.example/v2/audience/profiles/reports/c5f2d3e4-6a7b-4c8d-9e0f-1a2b3c4d5e6f',
  poll_url: 'https://cdp.shop.example/audience/profiles/reports/c5f2d3e4-6a7b-4c8d-9e0f-1a2b3c4d5e6f',
  region: 'eu',
  system: 'magento',
};

const TEXT_BY_FORMAT: Record<string, string> = {
  'date-time': '2026-03-01T09:30:00Z',
  date: '2026-03-01',
  email: 'anna.berg@example.org',
  uri: 'https://shop.example/',
  uuid: '7d3c2a10-4f5e-4b6a-9c8d-1e2f3a4b5c6d',
};

/** An example of a schema (OpenAPI 3.0, with no references), taking realistic values by name. */
export function exampleOf(schema: Json | undefined, name = '', depth = 0): unknown {
  if (!schema || depth > 16) return undefined;
  if (schema.example !== undefined) return schema.example;
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0];
  if (schema.default !== undefined && schema.default !== null) return schema.default;
  if (Array.isArray(schema.enum)) return schema.enum.find((v: unknown) => v !== null) ?? schema.enum[0];
  for (const key of ['anyOf', 'oneOf'] as const)
    if (Array.isArray(schema[key])) {
      const branch = schema[key].find((s: Json) => s.type !== 'null' && !s.nullable) ?? schema[key][0];
      return exampleOf(branch, name, depth + 1);
    }
  if (Array.isArray(schema.allOf))
    return Object.assign({}, ...schema.allOf.map((s: Json) => exampleOf(s, name, depth + 1)));
  const known = VALUES[name];
  const type = Array.isArray(schema.type) ? schema.type.find((t: string) => t !== 'null') : schema.type;
  switch (type) {
    case 'object': {
      const out: Json = {};
      for (const [key, property] of Object.entries((schema.properties ?? {}) as Record<string, Json>)) {
        const value = exampleOf(property, key, depth + 1);
        if (value !== undefined) out[key] = value;
      }
      const extra = schema.additionalProperties;
      if (Object.keys(out).length === 0 && extra && typeof extra === 'object') {
        const value = exampleOf(extra, '', depth + 1);
        if (value !== undefined) out[String(VALUES.attribute_discriminator)] = value;
      }
      return out;
    }
    case 'array': {
      const item = exampleOf(schema.items, name.replace(/s$/, ''), depth + 1);
      return item === undefined ? [] : Array.from({ length: Math.max(1, schema.minItems ?? 1) }, () => item);
    }
    case 'string': {
      if (typeof known === 'string' && (!schema.pattern || new RegExp(schema.pattern, 'u').test(known))) return known;
      if (schema.format && TEXT_BY_FORMAT[schema.format]) return TEXT_BY_FORMAT[schema.format];
      if (typeof schema.pattern === 'string' && /\[0-9\]|\\d/.test(schema.pattern)) return '1042';
      if (/_at$|_time$|^time$|timestamp/.test(name)) return TEXT_BY_FORMAT['date-time'];
      if (/_id$|^id$/.test(name)) return String(VALUES.version_id);
      if (/discriminator/.test(name)) return String(VALUES.discriminator);
      if (/_url$|^url$/.test(name)) return String(VALUES.url);
      return 'Example'.padEnd(schema.minLength ?? 0, '.');
    }
    case 'integer':
    case 'number':
      if (typeof known === 'number') return known;
      return schema.minimum ?? (/count|total|size/.test(name) ? 128 : 1);
    case 'boolean':
      return false;
    default:
      return known ?? {};
  }
}

/** Whether the reference's operator part holds an operation (by its tags). */
const isOperator = (operation: Json) => (operation.tags ?? []).some((t: string) => t in OPERATOR_TAGS);

const METHODS_IN_ORDER = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options', 'trace'];

/** The operations of a document, with their path and method. */
function operationsOf(doc: Json): { path: string; method: string; operation: Json }[] {
  return Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS_IN_ORDER.includes(method))
      .map(([method, operation]) => ({ path, method, operation: operation as Json })),
  );
}

/**
 * The methods of each path in the usual order (get, post, put, patch, delete), and array query
 * parameters declared as the service reads them: comma-separated or repeated (`form`, exploded).
 */
function tidy(doc: Json): void {
  for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
    const order = (m: string) => METHODS_IN_ORDER.indexOf(m) + 1 || 99;
    doc.paths[path] = Object.fromEntries(Object.entries(item).sort(([a], [b]) => order(a) - order(b)));
    for (const operation of Object.values(doc.paths[path] as Record<string, Json>))
      for (const parameter of operation.parameters ?? [])
        if (parameter.in === 'query' && parameter.schema?.type === 'array') {
          parameter.style ??= 'form';
          parameter.explode ??= true;
        }
  }
}

/** The values of every `ListedString` (src/core/schemas.ts) as the schema's `enum`. */
function listValues(node: unknown): void {
  if (node === null || typeof node !== 'object') return;
  const object = node as Json;
  if (Array.isArray(object[LISTED_VALUES])) {
    object.enum = object[LISTED_VALUES];
    delete object[LISTED_VALUES];
  }
  for (const [key, value] of Object.entries(object)) if (key !== 'example' && key !== 'examples') listValues(value);
}

/** The answers that are files (`FileAnswer`): each of their media types with a body of bytes. */
function fileAnswers(doc: Json): void {
  for (const { operation } of operationsOf(doc))
    for (const response of Object.values((operation.responses ?? {}) as Record<string, Json>)) {
      const types = response.content?.['application/json']?.schema?.[FILE_MEDIA_TYPES] as string[] | undefined;
      if (types)
        response.content = Object.fromEntries(types.map((t) => [t, { schema: { type: 'string', format: 'binary' } }]));
    }
}

/** Examples of every operation: its declared ones (`x-examples`), else made from the schemas. */
function addExamples(doc: Json): void {
  for (const { operation } of operationsOf(doc)) {
    const declared = (operation['x-examples'] ?? {}) as { body?: unknown; response?: Record<string, unknown> };
    delete operation['x-examples'];
    for (const parameter of operation.parameters ?? []) {
      parameter.description ??= parameter.schema?.description ?? parameter.name.replaceAll('_', ' ');
      delete parameter.schema?.description;
      parameter.example ??= exampleOf(parameter.schema, parameter.name);
    }
    for (const [type, media] of Object.entries((operation.requestBody?.content ?? {}) as Record<string, Json>))
      if (media.example === undefined && media.examples === undefined && type !== 'multipart/form-data')
        media.example = declared.body ?? exampleOf(media.schema);
    for (const [status, response] of Object.entries((operation.responses ?? {}) as Record<string, Json>)) {
      if (!/^2/.test(status)) continue;
      for (const media of Object.values((response.content ?? {}) as Record<string, Json>))
        if (media.example === undefined && media.examples === undefined)
          media.example = declared.response?.[status] ?? exampleOf(media.schema);
    }
  }
}

/**
 * Moves every schema with a `title` into `components.schemas` under that title and refers to it,
 * so that shared types (the problem document, a profile's attributes, an export's status) are
 * named once; the errors of every operation refer to the one problem response.
 */
function nameComponents(doc: Json): void {
  const schemas: Json = (doc.components.schemas ??= {});
  const seen = new Map<string, string>();
  const visit = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(visit);
    if (node === null || typeof node !== 'object') return node;
    const object = node as Json;
    // Examples are values, not schemas: a `title` in one is data.
    for (const key of Object.keys(object))
      if (key !== 'example' && key !== 'examples') object[key] = visit(object[key]);
    const title = object.title;
    if (typeof title !== 'string' || !/^[A-Z][A-Za-z0-9]*$/.test(title) || !('type' in object || 'anyOf' in object))
      return object;
    const text = JSON.stringify(object);
    const known = seen.get(title);
    if (known !== undefined && known !== text) throw new Error(`Two different schemas are titled ${title}`);
    seen.set(title, text);
    schemas[title] = object;
    return { $ref: `#/components/schemas/${title}` };
  };
  for (const { operation } of operationsOf(doc)) {
    for (const status of Object.keys(operation.responses ?? {}))
      if (/^[45]XX$/.test(status)) operation.responses[status] = { $ref: '#/components/responses/Problem' };
    for (const part of ['parameters', 'requestBody', 'responses']) if (operation[part]) visit(operation[part]);
  }
  const problem = doc.components.responses?.Problem;
  if (problem) visit(problem);
}

/** The swagger plugin's options: the document's frame, and the shaping of the whole. */
export function openapiOptions(config: Config, problemSchema: Json): SwaggerOptions {
  const tag = (descriptions: Record<string, string>) =>
    Object.entries(descriptions).map(([name, description]) => ({ name, description }));
  return {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'audience API',
        version: '0.1.0',
        description: [
          'The HTTP interface of **audience**, a self-hostable audience and marketing data service: profiles,',
          'their attributes, tags, events and consents, segments, imports and exports, activities and mail.',
          '',
          'Authenticate with an API key: `POST /oauth/token` with its client id and secret answers a bearer',
          `token valid for ${TOKEN_LIFETIME}; here: **Authorize**, then give the client id and secret. Every error is a`,
          'problem document (`application/problem+json`) whose `type` names its code; `GET /errors` lists',
          'them all. The operator API (`/admin`, the operator token) is the second definition of this page.',
        ].join('\n'),
        contact: { name: 'audience operators', url: `${config.publicUrl}/docs` },
        license: { name: 'Apache-2.0', url: 'https://www.apache.org/licenses/LICENSE-2.0' },
      },
      servers: [{ url: config.publicUrl, description: 'This service (PUBLIC_URL)' }],
      components: {
        securitySchemes: {
          oauth: {
            type: 'oauth2',
            description: 'The client credentials of an API key, exchanged at /oauth/token for a bearer token.',
            flows: { clientCredentials: { tokenUrl: `${config.publicUrl}/oauth/token`, scopes: {} } },
          },
          bearer: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description: 'An access token from /oauth/token, pasted.',
          },
          operator: {
            type: 'http',
            scheme: 'bearer',
            description: 'The operator token (ADMIN_TOKEN, or the one the server printed at its first start).',
          },
        },
        responses: {
          Problem: {
            description: 'A problem document (RFC 9457): its `type` names the error code.',
            content: {
              'application/problem+json': {
                schema: problemSchema,
                example: exampleOf(problemSchema),
              },
            },
          },
        },
      },
      security: [{ oauth: [] }, { bearer: [] }],
      tags: [...tag(PUBLIC_TAGS), ...tag(OPERATOR_TAGS)],
      // Redoc's and Scalar's grouping of tags; Swagger UI shows the two parts as two definitions.
      ...({
        'x-tagGroups': [
          { name: 'Public API', tags: Object.keys(PUBLIC_TAGS) },
          { name: 'Operator API', tags: Object.keys(OPERATOR_TAGS) },
        ],
      } as object),
    },
    transformObject: (documents) => {
      const doc = structuredClone((documents as { openapiObject: Json }).openapiObject);
      tidy(doc);
      listValues(doc.paths);
      fileAnswers(doc);
      addExamples(doc);
      nameComponents(doc);
      doc['x-webhooks'] = webhooksOf();
      return doc;
    },
  };
}

/**
 * A JSON schema as OpenAPI 3.0 writes it (the operations' schemas get this from the swagger
 * plugin): `const` as a one-value `enum`, and a `null` branch of `anyOf` as `nullable`.
 */
function toOpenApi30(node: unknown): any {
  if (Array.isArray(node)) return node.map(toOpenApi30);
  if (node === null || typeof node !== 'object') return node;
  const out: Json = Object.fromEntries(Object.entries(node).map(([k, v]) => [k, toOpenApi30(v)]));
  if ('const' in out) {
    out.enum = [out.const];
    delete out.const;
  }
  if (Array.isArray(out.anyOf) && out.anyOf.some((b: Json) => b.type === 'null')) {
    const rest = out.anyOf.filter((b: Json) => b.type !== 'null');
    delete out.anyOf;
    return rest.length === 1 ? { ...out, ...rest[0], nullable: true } : { ...out, anyOf: rest, nullable: true };
  }
  return out;
}

/**
 * The payloads of webhook deliveries, one per event type, as the document's webhooks (docs/webhooks.md).
 * The document is OpenAPI 3.0, whose top level has no `webhooks` (3.1's): `x-webhooks` is the form
 * Redoc and Redocly read for 3.0, with the same shape.
 */
function webhooksOf(): Json {
  const header = (name: string, description: string) => ({
    name,
    in: 'header',
    required: true,
    description,
    schema: { type: 'string' },
  });
  return Object.fromEntries(
    WEBHOOK_EVENT_TYPES.map((type) => {
      const schema = toOpenApi30(JSON.parse(JSON.stringify(payloadSchema(type))));
      return [
        type,
        {
          post: {
            operationId: `webhook-${type.replace('.', '-')}`,
            summary: `${type} delivered`,
            description: `What an endpoint subscribed to \`${type}\` receives. Answer 2xx to take it; anything else, or no answer within 10 s, is retried with back-off for a day (docs/webhooks.md).`,
            tags: ['webhooks'],
            parameters: [
              header('webhook-id', 'The event id: the same on every attempt and replay; deduplicate on it'),
              header('webhook-timestamp', 'Seconds since the epoch when the attempt was sent'),
              header(
                'webhook-signature',
                'Space-separated `v1,<base64 HMAC-SHA256 of id.timestamp.body>`, one per secret in use',
              ),
            ],
            requestBody: {
              required: true,
              content: { 'application/json': { schema, example: exampleOf(schema) } },
            },
            responses: { '200': { description: 'Taken (any 2xx)' } },
          },
        },
      ];
    }),
  );
}

/** The public or the operator part of the document: its operations and the tags and components they use. */
export function partOf(doc: Json, part: 'public' | 'operator'): Json {
  const wanted = (operation: Json) => isOperator(operation) === (part === 'operator');
  const paths: Json = {};
  for (const { path, method, operation } of operationsOf(doc))
    if (wanted(operation)) (paths[path] ??= {})[method] = operation;
  const names = Object.keys(part === 'operator' ? OPERATOR_TAGS : PUBLIC_TAGS);
  // Only the components the part refers to, directly or through another component.
  const used = new Set<string>();
  let text = JSON.stringify(paths);
  for (let added = true; added;) {
    added = false;
    for (const [, kind, name] of text.matchAll(/"#\/components\/(schemas|responses)\/([^"]+)"/g))
      if (!used.has(`${kind}/${name}`)) {
        used.add(`${kind}/${name}`);
        text += JSON.stringify(doc.components[kind][name]);
        added = true;
      }
  }
  const pick = (kind: string) =>
    Object.fromEntries(Object.entries(doc.components[kind] ?? {}).filter(([name]) => used.has(`${kind}/${name}`)));
  const { oauth, bearer, operator } = doc.components.securitySchemes;
  const { 'x-tagGroups': _, 'x-webhooks': webhooks, ...rest } = doc;
  return {
    ...rest,
    info: { ...doc.info, title: part === 'operator' ? 'audience operator API' : 'audience API' },
    tags: doc.tags.filter((t: Json) => names.includes(t.name)),
    ...(part === 'operator' ? { security: [{ operator: [] }] } : { 'x-webhooks': webhooks }),
    components: {
      securitySchemes: part === 'operator' ? { operator } : { oauth, bearer },
      responses: pick('responses'),
      schemas: pick('schemas'),
    },
    paths,
  };
}

/** The mark of the reference's top bar and tab: the project's name, drawn, with no framework's logo. */
const MARK = `<svg xmlns="http://www.w3.org/2000/svg" width="160" height="32" viewBox="0 0 160 32"><circle cx="16" cy="16" r="12" fill="#2f6f5e"/><circle cx="16" cy="16" r="5" fill="#ffffff"/><text x="36" y="22" font-family="sans-serif" font-size="18" fill="#ffffff">audience</text></svg>`;
const ICON = `<svg xmlns="http://www.w3.org/2000/svg" width="32" height="32" viewBox="0 0 32 32"><circle cx="16" cy="16" r="14" fill="#2f6f5e"/><circle cx="16" cy="16" r="6" fill="#ffffff"/></svg>`;

/**
 * The reference at /docs: Swagger UI (Apache-2.0, served from this process, no CDN) with the
 * project's title and mark, the public API and the operator API as two definitions, and the
 * client-credentials flow under "Authorize". Its pages allow only their own scripts and styles.
 */
export const docsOptions: FastifySwaggerUiOptions = {
  routePrefix: '/docs',
  logo: { type: 'image/svg+xml', content: MARK, href: '/docs', target: '_self' },
  theme: {
    title: 'audience API reference',
    favicon: [{ filename: 'audience.svg', rel: 'icon', type: 'image/svg+xml', sizes: 'any', content: ICON }],
    css: [{ filename: 'audience.css', content: '.swagger-ui .topbar { background-color: #1d3f36; }' }],
  },
  uiConfig: {
    urls: [
      { url: '/openapi/public.json', name: 'Public API' },
      { url: '/openapi/operator.json', name: 'Operator API' },
    ],
    ...({ 'urls.primaryName': 'Public API' } as object),
    docExpansion: 'list',
    defaultModelsExpandDepth: 0,
    displayRequestDuration: true,
    persistAuthorization: false,
    tryItOutEnabled: false,
  },
  initOAuth: { appName: 'audience API reference' },
  validatorUrl: false,
  staticCSP:
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'",
};
