/**
 * Parameters of set-based statements. pg encodes a JavaScript array element by element, quoting
 * and escaping each with regular expressions: for the batches of an import that was a tenth of the
 * worker's CPU (docs/benchmarks.md "Imports"). So ids are joined into the array's text form as they
 * are, and text and JSON values go as one JSON array, which JSON.stringify writes natively; SQL
 * unpacks it with jsonb_array_elements(_text) and zips the columns with ROWS FROM.
 */

/** A bigint[] parameter of ids (strings of digits, or integers). */
export function idArray(ids: readonly (string | number)[]): string {
  const text = ids.join(',');
  if (!/^[0-9,-]*$/.test(text)) throw new Error('idArray takes integers only');
  return `{${text}}`;
}
