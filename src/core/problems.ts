/**
 * Every error the service answers, once: its HTTP status, its title and its code (the `type`
 * of the problem document is `/errors/<code>`). Published codes of the platform are kept
 * (ENDPOINTS.md "Facts"); the others follow the same form, grouped by area:
 * AUD-10xx request and platform, AUD-11xx definitions and accounts, AUD-12xx profiles, AUD-14xx types,
 * AUD-16xx consents, AUD-17xx segments and AQL, AUD-18xx imports, AUD-19xx exports, AUD-20xx activities,
 * AUD-21xx transactional mail, AUD-22xx the emulator's control API, AUD-23xx webhooks.
 */
export const PROBLEMS = {
  'AUD-0': { status: 400, title: 'Bad request' },
  'AUD-1': { status: 404, title: 'Resource not found' },
  'AUD-2': { status: 503, title: 'Service unavailable' },
  'AUD-4': { status: 500, title: 'Internal error' },
  'AUD-6': { status: 400, title: 'Client-side error' },
  'AUD-8': { status: 401, title: 'Authorization failure' },
  'AUD-9': { status: 403, title: 'Access denied' },
  'AUD-1001': { status: 413, title: 'Request body too large' },
  'AUD-1002': { status: 429, title: 'Rate limit reached' },
  'AUD-1003': { status: 400, title: 'Request body lacks expected fields' },
  'AUD-1004': { status: 400, title: 'Malformed request body' },
  'AUD-1005': { status: 415, title: 'Unsupported media type' },
  'AUD-1006': { status: 405, title: 'Method not allowed' },
  'AUD-1007': { status: 413, title: 'List limit exceeded' },
  'AUD-1008': { status: 400, title: 'Invalid client credentials request' },
  'AUD-1009': { status: 401, title: 'Invalid client credentials' },
  'AUD-1010': { status: 431, title: 'Request header fields too large' },
  'AUD-1011': { status: 408, title: 'Request timeout' },
  'AUD-1012': { status: 400, title: 'NUL character in text' },
  'AUD-1013': { status: 400, title: 'Lone surrogate in text' },
  'AUD-1014': { status: 400, title: 'Body nested too deeply' },
  'AUD-1015': { status: 404, title: 'Job not found' },
  'AUD-1016': { status: 409, title: 'Job not failed' },
  'AUD-1101': { status: 404, title: 'Keyspace not found' },
  'AUD-1102': { status: 404, title: 'Section not found' },
  'AUD-1103': { status: 404, title: 'Tag not found' },
  'AUD-1104': { status: 404, title: 'Segment not found' },
  'AUD-1105': { status: 404, title: 'Segment version not found' },
  'AUD-1106': { status: 403, title: 'Keyspace not allowed' },
  'AUD-1107': { status: 403, title: 'Section access denied' },
  'AUD-1108': { status: 400, title: 'Tag limit exceeded' },
  'AUD-1109': { status: 409, title: 'Same discriminator with a different specification' },
  'AUD-1110': { status: 404, title: 'Account not found' },
  'AUD-1111': { status: 400, title: 'Target not found' },
  'AUD-1112': { status: 409, title: 'Account name not unique' },
  'AUD-1113': { status: 400, title: 'Folder cannot be its own parent' },
  'AUD-1114': { status: 400, title: 'Folder parents form a cycle' },
  'AUD-1115': { status: 400, title: 'Segment query refers to ids without a section' },
  'AUD-1116': { status: 400, title: 'Not a limit' },
  'AUD-1117': { status: 400, title: 'Limit out of range' },
  'AUD-1118': { status: 400, title: 'Manifest names no account' },
  'AUD-1201': { status: 404, title: 'Profile not found' },
  'AUD-1202': { status: 410, title: 'Profile locked' },
  'AUD-1203': { status: 403, title: 'Keyspace not authorised to update the profile' },
  'AUD-1204': { status: 409, title: 'Profile already exists' },
  'AUD-1205': { status: 400, title: 'Invalid profile key' },
  'AUD-1206': { status: 400, title: 'Attribute not defined for the profile' },
  'AUD-1207': { status: 400, title: 'Deprecated type used for update' },
  'AUD-1208': { status: 403, title: 'Write not granted for the type through the keyspace' },
  'AUD-1209': { status: 400, title: 'Value does not conform to the type' },
  'AUD-1210': { status: 413, title: 'Profile update size limit exceeded' },
  'AUD-1211': { status: 400, title: 'Attribute is hidden' },
  'AUD-1212': { status: 400, title: 'Key attribute cannot be cleared' },
  'AUD-1213': { status: 409, title: 'Key attribute update needs profile_key_update_method' },
  'AUD-1214': { status: 400, title: 'Merge needs exactly two profiles' },
  'AUD-1215': { status: 409, title: 'Blocking attributes conflict on merge' },
  'AUD-1216': { status: 409, title: 'Merge limit reached' },
  'AUD-1217': { status: 400, title: 'Canonical profile cannot be unmerged' },
  'AUD-1218': { status: 400, title: 'Tag not defined for the section' },
  'AUD-1219': { status: 400, title: 'Events property missing' },
  'AUD-1220': { status: 400, title: 'Event type not found' },
  'AUD-1221': { status: 400, title: 'Identifier does not belong to the profile' },
  'AUD-1222': { status: 409, title: 'Identifier already exists' },
  'AUD-1223': { status: 400, title: 'Identifier does not match the mapped attribute' },
  'AUD-1400': { status: 400, title: 'Invalid type definition' },
  'AUD-1401': { status: 400, title: 'Type processing error' },
  'AUD-1402': { status: 400, title: 'No such field' },
  'AUD-1403': { status: 400, title: 'Array types unsupported' },
  'AUD-1404': { status: 400, title: 'Field condition on a non-primitive type' },
  'AUD-1601': { status: 400, title: 'No address to consent' },
  'AUD-1602': { status: 400, title: 'Consent state value unsupported' },
  'AUD-1603': { status: 400, title: 'Consent type not supported by the API yet' },
  'AUD-1604': { status: 409, title: 'Current consent state already pending' },
  'AUD-1605': { status: 409, title: 'Consent transition not supported' },
  'AUD-1606': { status: 400, title: 'Topic channel differs from the channel in the request' },
  'AUD-1607': { status: 400, title: 'Channel ID not found' },
  'AUD-1608': { status: 400, title: 'Communication type invalid for channel' },
  'AUD-1609': { status: 403, title: 'Keyspace does not manage subscriptions' },
  'AUD-1610': { status: 400, title: 'Topic not found' },
  'AUD-1611': { status: 400, title: 'Consent request invalid' },
  'AUD-1612': { status: 404, title: 'Consent list not found' },
  'AUD-1801': { status: 400, title: 'Several keyspace mappings with channel-specific topics' },
  'AUD-1802': { status: 400, title: 'Channel required for the topic' },
  'AUD-1803': { status: 400, title: 'Conflicting consent updates for the same topic and channel' },
  'AUD-1804': { status: 429, title: 'Pending import limit reached' },
  'AUD-1805': { status: 404, title: 'Import not found' },
  'AUD-1806': { status: 403, title: 'Upload refused' },
  'AUD-1807': { status: 403, title: 'Upload window expired' },
  'AUD-1808': { status: 413, title: 'Import file too large' },
  'AUD-1809': { status: 409, title: 'Import not waiting for a file' },
  'AUD-1810': { status: 400, title: 'Upload form invalid' },
  'AUD-1701': { status: 400, title: 'AQL syntax error' },
  'AUD-1702': { status: 400, title: 'Invalid section specifier' },
  'AUD-1703': { status: 400, title: 'Invalid attribute or event specifier' },
  'AUD-1704': { status: 400, title: 'Wrong data selector' },
  'AUD-1705': { status: 400, title: 'Missing condition' },
  'AUD-1706': { status: 400, title: 'Missing string constant' },
  'AUD-1707': { status: 400, title: 'Invalid time-window syntax' },
  'AUD-1708': { status: 400, title: 'Several event expressions' },
  'AUD-1709': { status: 400, title: 'Unsupported expression' },
  'AUD-1710': { status: 400, title: 'Generated query size limit reached' },
  'AUD-1711': { status: 400, title: 'Segment not found' },
  'AUD-1712': { status: 400, title: 'Time zone not recognised' },
  'AUD-1713': { status: 400, title: 'Version ID belongs to another segment' },
  'AUD-1714': { status: 400, title: 'Give a stored segment or a segment definition' },
  'AUD-1901': { status: 404, title: 'Export in progress' },
  'AUD-1902': { status: 410, title: 'Export no longer available' },
  'AUD-1903': { status: 404, title: 'Export not found' },
  'AUD-1904': { status: 503, title: 'Export processing failed' },
  'AUD-1905': { status: 429, title: 'Pending export limit reached' },
  'AUD-1906': { status: 400, title: 'Invalid segment filter' },
  'AUD-1907': { status: 400, title: 'Give channel_discriminator or channels' },
  'AUD-1908': { status: 400, title: 'Column name used twice' },
  'AUD-1920': { status: 400, title: 'Export key invalid' },
  'AUD-1921': { status: 400, title: 'Callback URL scheme not http or https' },
  'AUD-1922': { status: 400, title: 'Callback URL invalid' },
  'AUD-1923': { status: 400, title: 'Give segment_discriminators or segment_definitions' },
  'AUD-1924': { status: 400, title: 'No segment named' },
  'AUD-1925': { status: 400, title: 'Segment name empty' },
  'AUD-1910': { status: 400, title: 'Event window ends before it starts' },
  'AUD-1911': { status: 400, title: 'Event window longer than three months' },
  'AUD-1912': { status: 403, title: 'Download URL expired' },
  'AUD-1913': { status: 403, title: 'Download credentials missing or invalid' },
  'AUD-2001': { status: 404, title: 'Activity not found' },
  'AUD-2002': { status: 409, title: 'Activity kind or section cannot change' },
  'AUD-2003': { status: 400, title: 'Activity event invalid' },
  'AUD-2004': { status: 400, title: 'Trigger type unsupported' },
  'AUD-2005': { status: 400, title: 'Field not of the activity kind' },
  'AUD-2006': { status: 400, title: 'Activity sent before it was created' },
  'AUD-2101': { status: 400, title: 'Invalid template' },
  'AUD-2102': { status: 404, title: 'Tracking link not recognised' },
  'AUD-2103': { status: 404, title: 'Outbox message not found' },
  'AUD-2104': { status: 413, title: 'Variables too large' },
  'AUD-2105': { status: 413, title: 'Attachments too large' },
  'AUD-2106': { status: 404, title: 'Transaction not found' },
  'AUD-2107': { status: 400, title: 'Attachment content not base64' },
  'AUD-2201': { status: 404, title: 'Emulator snapshot not found' },
  'AUD-2202': { status: 400, title: 'Fault without an effect' },
  'AUD-2203': { status: 400, title: 'Clock set before the real time' },
  'AUD-2204': { status: 404, title: 'Emulator job not found' },
  'AUD-2205': { status: 409, title: 'Emulator job not waiting' },
  'AUD-2206': { status: 502, title: 'Bad gateway' },
  'AUD-2207': { status: 504, title: 'Gateway timeout' },
  'AUD-2208': { status: 404, title: 'Emulator namespace not found' },
  'AUD-2301': { status: 404, title: 'Webhook endpoint not found' },
  'AUD-2302': { status: 400, title: 'Webhook URL invalid' },
  'AUD-2303': { status: 409, title: 'Webhook URL already subscribed' },
  'AUD-2304': { status: 404, title: 'Webhook delivery not found' },
  'AUD-2305': { status: 400, title: 'Time window ends before it starts' },
} as const satisfies Record<string, { status: number; title: string }>;

export type ProblemCode = keyof typeof PROBLEMS;

/** The `type` URI of a code; `GET /errors/<code>` describes it. */
export function problemType(code: ProblemCode): string {
  return `/errors/${code}`;
}

/** An error the client caused or must know of: written as `application/problem+json`. */
export class Problem extends Error {
  readonly code: ProblemCode;
  readonly status: number;
  readonly title: string;
  readonly detail: string;
  readonly headers: Record<string, string>;
  /** Members of the document beyond the standard ones: where in a query an AQL error is (`ProblemPosition`). */
  readonly position: ProblemPosition | undefined;

  constructor(code: ProblemCode, detail: string, headers: Record<string, string> = {}, position?: ProblemPosition) {
    super(detail);
    this.code = code;
    this.status = PROBLEMS[code].status;
    this.title = PROBLEMS[code].title;
    this.detail = detail;
    this.headers = headers;
    this.position = position;
  }

  /** The same problem with `prefix` before its detail (which field or item of a request it is about), its headers and position kept. */
  within(prefix: string): Problem {
    return new Problem(this.code, `${prefix}${this.detail}`, this.headers, this.position);
  }

  toJSON(): ProblemBody {
    return {
      type: problemType(this.code),
      title: this.title,
      status: this.status,
      status_code: this.status,
      detail: this.detail,
      ...this.position,
    };
  }
}

/** Where in a text (an AQL query) a problem is: line and column from 1, and the offset of the character from 0. */
export interface ProblemPosition {
  line: number;
  column: number;
  offset: number;
}

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  status_code: number;
  detail: string;
  line?: number;
  column?: number;
  offset?: number;
}
