import { AppError } from '../../core/errors.js';

// Control characters (NUL, newlines, escapes) have no place in a one-line name, and PostgreSQL TEXT cannot store NUL.
const CONTROL = /\p{Cc}/u;

/** A person's or business's name: trimmed, 1 to `max` characters, no control characters; 400 otherwise. */
export function parseDisplayName(raw: string, field: string, max: number): string {
  const name = raw.trim();
  if (!name) throw new AppError('invalid_request', `${field}: must not be empty`);
  if ([...name].length > max) throw new AppError('invalid_request', `${field}: must be at most ${max} characters`);
  if (CONTROL.test(name)) throw new AppError('invalid_request', `${field}: must not contain control characters`);
  return name;
}
