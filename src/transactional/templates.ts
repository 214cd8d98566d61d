import type { Liquid, Template } from 'liquidjs';
import { Problem } from '../core/problems.ts';

/**
 * The templates of a transactional message (docs/mail.md "Templates"): Liquid, through liquidjs,
 * which runs no code from a template. An HTML body's output is HTML-escaped (`| raw` opts out),
 * since variables come from the caller's request; the other parts are plain text.
 */

/** The parts of a message that are templates. */
export interface MessageTemplates {
  subject: string;
  preheader: string;
  html: string;
  /** Null: the text alternative is made from the rendered HTML. */
  text: string | null;
}

export type RenderedParts = { [K in keyof MessageTemplates]: string };

/** What a template may read: the send's variables by name, and `profile`, `variables`, `unsubscribe_url`. */
export type TemplateContext = Record<string, unknown>;

// Bounds that keep a template from holding a worker: a loop over a huge range, a string doubled
// until memory runs out (liquidjs counts both), or a huge template.
const LIMITS = { parseLimit: 1_000_000, renderLimit: 2_000, memoryLimit: 50_000_000 };
/** Parsed templates kept per engine: a send renders the same activity's templates as the one before. */
const PARSED_CACHE_SIZE = 200;

interface Engines {
  html: Liquid;
  text: Liquid;
}
let engines: Promise<Engines> | undefined;
const parsed = { html: new Map<string, Template[]>(), text: new Map<string, Template[]>() };

/** The two engines, loaded when first needed (an API that saves no template does not load liquidjs). */
function loadEngines(): Promise<Engines> {
  engines ??= import('liquidjs').then(({ Liquid }) => {
    const make = (output: { outputEscape?: 'escape' }) => {
      // No file system: `templates: {}` answers every name with "not found", and the tags that
      // read other templates are refused when parsed, so the error shows when the activity is saved.
      const engine = new Liquid({
        ...LIMITS,
        templates: {},
        strictFilters: true,
        ownPropertyOnly: true,
        ...output,
      });
      for (const tag of ['include', 'render', 'layout']) {
        engine.registerTag(tag, {
          parse() {
            throw new Error(`the ${tag} tag is not available: a message's templates are self-contained`);
          },
          render() {},
        });
      }
      return engine;
    };
    return { html: make({ outputEscape: 'escape' }), text: make({}) };
  });
  return engines;
}

/** Which engine renders a part: the HTML body escapes its output. */
const engineOf = (part: keyof MessageTemplates): keyof Engines => (part === 'html' ? 'html' : 'text');

async function parse(part: keyof MessageTemplates, source: string): Promise<Template[]> {
  const kind = engineOf(part);
  const cache = parsed[kind];
  let templates = cache.get(source);
  if (!templates) {
    templates = (await loadEngines())[kind].parse(source);
    if (cache.size >= PARSED_CACHE_SIZE) cache.delete(cache.keys().next().value!);
    cache.set(source, templates);
  }
  return templates;
}

/**
 * Checks templates before they are kept (an activity being saved): a template that does not
 * parse is a 400 naming the field (`names` gives the caller's field names), the line and the
 * column, rather than a send failing later.
 */
export async function checkTemplates(
  parts: Partial<MessageTemplates>,
  names: Partial<Record<keyof MessageTemplates, string>> = {},
): Promise<void> {
  for (const [part, source] of Object.entries(parts) as [keyof MessageTemplates, string | null | undefined][]) {
    if (source === null || source === undefined) continue;
    try {
      await parse(part, source);
    } catch (err) {
      throw new Problem('AUD-2101', `${names[part] ?? part} is not a valid template: ${(err as Error).message}`);
    }
  }
}

/**
 * Renders a message's parts with `context`. A part that fails (a render limit reached, a filter
 * given a wrong value) throws, naming the part; the send then fails with that reason.
 */
export async function renderParts(templates: MessageTemplates, context: TemplateContext): Promise<RenderedParts> {
  const e = await loadEngines();
  const render = async (part: keyof MessageTemplates, source: string) => {
    try {
      return String(e[engineOf(part)].renderSync(await parse(part, source), context));
    } catch (err) {
      throw new Error(`the ${part} template failed to render: ${(err as Error).message}`);
    }
  };
  const html = await render('html', templates.html);
  return {
    subject: (await render('subject', templates.subject)).replace(/\s+/g, ' ').trim(),
    preheader: (await render('preheader', templates.preheader)).replace(/\s+/g, ' ').trim(),
    html,
    text: templates.text === null ? '' : await render('text', templates.text),
  };
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

/** Decodes the character references of HTML text: the few named ones mail bodies use, and numeric ones. */
export function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (whole, ref: string) => {
    if (ref[0] !== '#') return ENTITIES[ref.toLowerCase()] ?? whole;
    const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
    return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
  });
}

/** Escapes text for HTML content or a quoted attribute. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const BLOCKS = 'p|div|h[1-6]|table|tr|ul|ol|blockquote|section|article|header|footer|pre|hr';

/**
 * The text alternative of an HTML body, for messages whose activity gives none: paragraphs and
 * breaks become line breaks, list items lines of their own, links "text (url)".
 */
export function htmlToText(html: string): string {
  let text = html
    .replace(/<!--[\s\S]*?-->/g, '')
    .replace(/<(head|style|script|title)\b[\s\S]*?<\/\1\s*>/gi, '')
    .replace(/\s+/g, ' ')
    .replace(
      /<a\b[^>]*?\bhref\s*=\s*(?:"([^"]*)"|'([^']*)')[^>]*>([\s\S]*?)<\/a\s*>/gi,
      (_m, dq: string | undefined, sq: string | undefined, inner: string) => {
        const url = decodeEntities(dq ?? sq ?? '').trim();
        const label = decodeEntities(inner.replace(/<[^>]*>/g, '')).trim();
        return !label || label === url || (/^mailto:/i.test(url) && label === url.slice(7)) ? url : `${label} (${url})`;
      },
    )
    .replace(/<br\s*\/?>/gi, '\n')
    .replace(/<li\b[^>]*>/gi, '\n* ')
    .replace(new RegExp(`</?(?:${BLOCKS})\\b[^>]*>`, 'gi'), '\n\n')
    .replace(/<\/t[dh]\s*>/gi, ' ')
    .replace(/<[^>]*>/g, '');
  text = decodeEntities(text);
  return text
    .split('\n')
    .map((line) => line.replace(/[ \t]+/g, ' ').trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}
