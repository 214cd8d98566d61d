import { PassThrough, Readable, type Duplex } from 'node:stream';
import { text } from 'node:stream/consumers';
import { describe, expect, it } from 'vitest';
import { pipeWhileWriting } from './streams.ts';

/** A source that gives one chunk, then fails with `error`. */
function failingSource(error: Error): Readable {
  return Readable.from(
    (async function* () {
      yield 'first chunk';
      throw error;
    })(),
  );
}

describe('pipeWhileWriting', () => {
  it('hands the whole read to the write and settles when the write has', async () => {
    let written = '';
    await pipeWhileWriting(Readable.from(['a', 'b', 'c']), [new PassThrough()], async (piped) => {
      written = await text(piped);
    });
    expect(written).toBe('abc');
  });

  it("throws the read's own error, not the write's that it caused", async () => {
    const cause = new Error('the database went away');
    await expect(
      pipeWhileWriting(failingSource(cause), [new PassThrough()], (piped: Duplex) => text(piped)),
    ).rejects.toBe(cause);
  });

  it("throws the write's error and ends the read", async () => {
    const source = Readable.from(['a', 'b', 'c']);
    const refused = new Error('the disk is full');
    await expect(
      pipeWhileWriting(source, [new PassThrough()], async () => {
        throw refused;
      }),
    ).rejects.toBe(refused);
    expect(source.destroyed).toBe(true);
  });
});
