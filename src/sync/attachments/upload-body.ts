import type { IncomingMessage } from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import { AppError } from '../../core/errors.js';

/**
 * A request body as it arrives, for a resumable upload: it ends (rather than fails) when the client goes away or the
 * upload deadline closes the connection, so the bytes that did arrive are kept and a retry goes on from there. Past
 * `max` bytes it fails with 413, and nothing of it is kept.
 */
export function bodyUntilCut(raw: IncomingMessage, max: number): Readable {
  const out = new PassThrough();
  let seen = 0;
  let done = false;
  const stop = () => {
    done = true;
    raw.off('data', onData).off('end', finish).off('error', finish).off('close', finish);
  };
  const finish = () => {
    if (done) return;
    stop();
    out.end();
  };
  const onData = (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > max) {
      stop();
      out.destroy(new AppError('payload_too_large', `the upload has ${max} bytes left to send; this request brought more`));
      return;
    }
    if (!out.write(chunk)) raw.pause();
  };
  out.on('drain', () => raw.resume());
  if (raw.readableEnded) {
    out.end();
    return out;
  }
  raw.on('data', onData).once('end', finish).once('error', finish).once('close', finish);
  return out;
}
