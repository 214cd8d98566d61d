export type TokenKind = 'name' | 'number' | 'string' | 'punct' | 'invalid' | 'end';

export interface Token {
  kind: TokenKind;
  /** The text for names and punctuation, the decoded value for strings, the digits for numbers. */
  value: string;
  at: number;
  /** For an `invalid` token (an unexpected character, an unclosed string): what is wrong. */
  message?: string;
}

const PUNCT = ['&&', '||', '(', ')', '.', ',', '!', '[', ']'];

/**
 * Splits AQL text into tokens that carry their positions. Text that is no token ends the list
 * with an `invalid` token: the parser reports it only when it gets there, so that a fault before it
 * (such as a discriminator in `section(…)`) is named in its own terms.
 */
export function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (/\s/.test(c)) {
      i++;
    } else if (/[A-Za-z_]/.test(c)) {
      const start = i;
      while (i < text.length && /[A-Za-z0-9_]/.test(text[i])) i++;
      tokens.push({ kind: 'name', value: text.slice(start, i), at: start });
    } else if (/[0-9]/.test(c) || (c === '-' && /[0-9]/.test(text[i + 1] ?? ''))) {
      const start = i;
      i++;
      while (i < text.length && /[0-9.eE+-]/.test(text[i]) && !(text[i] === '.' && !/[0-9]/.test(text[i + 1] ?? '')))
        i++;
      tokens.push({ kind: 'number', value: text.slice(start, i), at: start });
    } else if (c === '"' || c === "'") {
      const start = i;
      let value = '';
      i++;
      while (i < text.length && text[i] !== c) {
        if (text[i] === '\\') {
          const next = text[i + 1];
          if (next === undefined) break;
          value += next === 'n' ? '\n' : next === 't' ? '\t' : next;
          i += 2;
        } else {
          value += text[i++];
        }
      }
      if (i >= text.length) {
        tokens.push({
          kind: 'invalid',
          value: text.slice(start),
          at: start,
          message: 'Expected the end of a string constant, found the end of the query',
        });
        break;
      }
      i++;
      tokens.push({ kind: 'string', value, at: start });
    } else {
      const p = PUNCT.find((p) => text.startsWith(p, i));
      if (!p) {
        tokens.push({ kind: 'invalid', value: c, at: i, message: `Unexpected character "${c}"` });
        break;
      }
      tokens.push({ kind: 'punct', value: p, at: i });
      i += p.length;
    }
  }
  tokens.push({ kind: 'end', value: '', at: text.length });
  return tokens;
}
