import crypto from 'node:crypto';
import { Problem } from '../core/problems.ts';
import { decodeEntities, escapeHtml } from './templates.ts';

/**
 * The tracking links of a message (docs/mail.md "Tracking"): an open pixel, a click link per link
 * of the HTML body and an unsubscribe link. Each names the account, the send and, for a click,
 * the link's index in the send's stored links, signed with a key derived from the server secret:
 * a link cannot be made for another send, and a click can only lead to a link the message held.
 */

export type TrackingKind = 'open' | 'click' | 'unsubscribe';

/** What a tracking link names. */
export interface TrackingTarget {
  accountId: string;
  transactionId: string;
  /** A click's link: its index in the send's links. */
  link?: number;
}

/** A link of a message as the CLICKED event tells it. */
export interface TrackedLink {
  url: string;
  title: string;
}

/** Bytes of the signature kept in a link: 128 bits cannot be guessed. */
const SIGNATURE_BYTES = 16;

/** The key of tracking signatures, apart from the server secret's other uses. */
export function trackingKey(serverSecret: string): Buffer {
  return crypto.createHmac('sha256', serverSecret).update('transactional mail tracking').digest();
}

function signature(key: Buffer, kind: TrackingKind, body: string): Buffer {
  return crypto.createHmac('sha256', key).update(`${kind}:${body}`).digest().subarray(0, SIGNATURE_BYTES);
}

/** The token of a tracking link: `account.transaction[.link].signature`. */
export function signTracking(key: Buffer, kind: TrackingKind, target: TrackingTarget): string {
  const body = [
    target.accountId,
    target.transactionId,
    ...(target.link === undefined ? [] : [String(target.link)]),
  ].join('.');
  return `${body}.${signature(key, kind, body).toString('base64url')}`;
}

const TOKEN =
  /^([0-9]{1,18})\.([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:\.([0-9]{1,6}))?\.([A-Za-z0-9_-]{22})$/;

/** What a tracking token names; 404 (AUD-2102) for a token this server did not sign for `kind`. */
export function readTracking(key: Buffer, kind: TrackingKind, token: string): TrackingTarget {
  const match = TOKEN.exec(token);
  const refused = () => new Problem('AUD-2102', `This ${kind} link is not one of this service's links`);
  if (!match) throw refused();
  const [, accountId, transactionId, link] = match;
  if ((kind === 'click') !== (link !== undefined)) throw refused();
  const body = token.slice(0, token.lastIndexOf('.'));
  if (!crypto.timingSafeEqual(Buffer.from(match[4], 'base64url'), signature(key, kind, body))) throw refused();
  return { accountId, transactionId, ...(link === undefined ? {} : { link: Number(link) }) };
}

/** The URLs of a send's tracking links, under the tracking base (TRACKING_URL, or the public URL). */
export function trackingUrls(base: string, key: Buffer, target: TrackingTarget) {
  return {
    open: `${base}/mail/open/${signTracking(key, 'open', target)}`,
    click: (link: number) => `${base}/mail/click/${signTracking(key, 'click', { ...target, link })}`,
    unsubscribe: `${base}/mail/unsubscribe/${signTracking(key, 'unsubscribe', target)}`,
  };
}

/** How long a link's title may be in its CLICKED event. */
const TITLE_LENGTH = 200;

/**
 * Replaces each http(s) link of an HTML body with its click link; answers the new body and the
 * links in order (a link's index is the one its click link names). Links that lead nowhere to
 * track (mailto:, tel:, anchors) and `skip` (the unsubscribe link) stay as they are.
 */
export function trackLinks(
  html: string,
  clickUrl: (link: number) => string,
  skip: string,
): { html: string; links: TrackedLink[] } {
  const links: TrackedLink[] = [];
  const tracked = html.replace(
    /(<a\b[^>]*?\bhref\s*=\s*)(?:"([^"]*)"|'([^']*)')([^>]*>)([\s\S]*?)(<\/a\s*>)/gi,
    (
      whole,
      start: string,
      dq: string | undefined,
      sq: string | undefined,
      rest: string,
      inner: string,
      end: string,
    ) => {
      const url = decodeEntities(dq ?? sq ?? '').trim();
      if (!/^https?:\/\//i.test(url) || url === skip) return whole;
      const titled = /\btitle\s*=\s*(?:"([^"]*)"|'([^']*)')/i.exec(start + rest);
      const title = decodeEntities(titled ? (titled[1] ?? titled[2]) : inner.replace(/<[^>]*>/g, ''))
        .replace(/\s+/g, ' ')
        .trim()
        .slice(0, TITLE_LENGTH);
      links.push({ url, title });
      return `${start}"${escapeHtml(clickUrl(links.length - 1))}"${rest}${inner}${end}`;
    },
  );
  return { html: tracked, links };
}

/** Puts `fragment` at the start of the body (after `<body …>`, or first when there is none). */
function atBodyStart(html: string, fragment: string): string {
  const body = /<body\b[^>]*>/i.exec(html);
  return body
    ? html.slice(0, body.index + body[0].length) + fragment + html.slice(body.index + body[0].length)
    : fragment + html;
}

/** Puts `fragment` at the end of the body (before `</body>`, or last). */
function atBodyEnd(html: string, fragment: string): string {
  const end = html.search(/<\/body\s*>/i);
  return end >= 0 ? html.slice(0, end) + fragment + html.slice(end) : html + fragment;
}

/** The pre-header: the preview that mail programs show after the subject, hidden in the message itself. */
export function addPreheader(html: string, preheader: string): string {
  if (preheader === '') return html;
  return atBodyStart(
    html,
    `<div style="display:none;max-height:0;overflow:hidden;mso-hide:all">${escapeHtml(preheader)}</div>`,
  );
}

/** The open pixel: a 1×1 image from the open link, last in the body. */
export function addOpenPixel(html: string, openUrl: string): string {
  return atBodyEnd(
    html,
    `<img src="${escapeHtml(openUrl)}" width="1" height="1" alt="" style="display:block;border:0;width:1px;height:1px">`,
  );
}

/** A transparent 1×1 GIF: what the open link answers. */
export const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
