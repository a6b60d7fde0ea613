// Why: a series answer's JSON is written column by column, never as one string. Whole, it is a string of 100 KB to
// megabytes: V8 builds and flattens a string larger than its largest regular heap object (128 KiB) about three times
// more slowly (measured in docs/benchmarks.md), and such a string lives until the next full collection.
import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { Series } from '../domain/series.js';

/** Answers with more values than this are streamed column by column; smaller ones are sent as one buffer. */
export const STREAM_VALUES = 50_000;

/** The answer's JSON in pieces: everything before the columns, then one piece per column. Joined, it is JSON.stringify(answer). */
export function* seriesJsonChunks(answer: Series): Generator<string> {
  const { metrics, min, max, ...rest } = answer;
  const head = JSON.stringify(rest);
  yield head.slice(0, -1);
  let first = head.length === 2;
  for (const [key, group] of [['metrics', metrics], ['min', min], ['max', max]] as const) {
    if (!group) continue;
    yield `${first ? '' : ','}${JSON.stringify(key)}:{`;
    first = false;
    let separator = '';
    for (const name of Object.keys(group)) {
      yield `${separator}${JSON.stringify(name)}:${JSON.stringify(group[name])}`;
      separator = ',';
    }
    yield '}';
  }
  yield '}';
}

function valueCount(answer: Series): number {
  const columns = Object.keys(answer.metrics).length * (answer.min ? 3 : 1);
  return columns * answer.timestamps.length;
}

/** Sends a series answer as bytes made from its pieces: small ones in one buffer, large ones streamed. */
export function sendSeries(reply: FastifyReply, answer: Series): FastifyReply {
  const chunks = seriesJsonChunks(answer);
  reply.type('application/json; charset=utf-8');
  if (valueCount(answer) > STREAM_VALUES) return reply.send(Readable.from(chunks));
  return reply.send(Buffer.concat(Array.from(chunks, (piece) => Buffer.from(piece))));
}
