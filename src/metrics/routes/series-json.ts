// Why: a series answer can hold hundreds of thousands of numbers; written whole, its JSON is one string of megabytes
// that lives until the next full collection. Written column by column, each piece is short-lived.
import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { Series } from '../domain/series.js';

/** Answers with more values than this are streamed column by column; smaller ones are one JSON.stringify. */
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

/** Sends a series answer: small ones as they are (the route's serializer), large ones streamed. */
export function sendSeries(reply: FastifyReply, answer: Series): FastifyReply {
  if (valueCount(answer) <= STREAM_VALUES) return reply.send(answer);
  return reply.type('application/json; charset=utf-8').send(Readable.from(seriesJsonChunks(answer)));
}
