import type { Address, OutgoingMessage } from './mailer.ts';
import { htmlToText, renderParts, type MessageTemplates } from './templates.ts';
import {
  addOpenPixel,
  addPreheader,
  trackLinks,
  trackingUrls,
  type TrackedLink,
  type TrackingTarget,
} from './tracking.ts';

/** An attachment as a send gives it (SPEC §4.8). */
export interface Attachment {
  name: string;
  content_type: string;
  content: string;
}

/** Everything a message is made of. */
export interface MessageInput {
  templates: MessageTemplates;
  variables: Record<string, unknown>;
  /** The profile's attribute values in the send's section, by attribute name. */
  profile: Record<string, unknown>;
  from: Address;
  to: Address;
  replyTo?: string;
  attachments: Attachment[];
  tracking: { base: string; key: Buffer; target: TrackingTarget };
}

/**
 * Makes a send's message (docs/mail.md "The message"): the templates rendered with the send's
 * variables (by name, and as `variables`), the profile's attributes (`profile`) and
 * `unsubscribe_url`; the HTML body's links replaced by click links, the pre-header and the open
 * pixel added; a text alternative from the HTML when the activity has no text body; and the
 * one-click unsubscribe headers of RFC 8058. Answers the message and its links in the order the
 * click links name them.
 */
export async function composeMessage(input: MessageInput): Promise<{ message: OutgoingMessage; links: TrackedLink[] }> {
  const urls = trackingUrls(input.tracking.base, input.tracking.key, input.tracking.target);
  const context = {
    ...input.variables,
    variables: input.variables,
    profile: input.profile,
    unsubscribe_url: urls.unsubscribe,
  };
  const rendered = await renderParts(input.templates, context);
  const tracked = trackLinks(rendered.html, urls.click, urls.unsubscribe);
  const domain = input.from.address.slice(input.from.address.lastIndexOf('@') + 1);
  const message: OutgoingMessage = {
    messageId: `<${input.tracking.target.transactionId}@${domain}>`,
    from: input.from,
    to: input.to,
    ...(input.replyTo ? { replyTo: input.replyTo } : {}),
    subject: rendered.subject,
    html: addOpenPixel(addPreheader(tracked.html, rendered.preheader), urls.open),
    // From the HTML as rendered, before tracking: its links read as the message's own.
    text: input.templates.text === null ? htmlToText(rendered.html) : rendered.text,
    headers: { 'List-Unsubscribe': `<${urls.unsubscribe}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
    attachments: input.attachments.map((a) => ({
      filename: a.name,
      contentType: a.content_type,
      content: Buffer.from(a.content, 'base64'),
    })),
  };
  return { message, links: tracked.links };
}
