import { Ajv, type Options } from 'ajv';
import addFormatsImport from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = addFormatsImport as unknown as (ajv: Ajv) => Ajv;

function makeAjv(extra: Options): Ajv {
  const ajv = new Ajv({ allErrors: false, useDefaults: true, removeAdditional: false, strict: false, ...extra });
  addFormats(ajv);
  return ajv;
}

/**
 * Bodies are validated strictly: a JSON string is never coerced into a number,
 * so wrong types are reported instead of silently converted. Query strings,
 * path parameters and headers arrive as text, so those are coerced.
 */
export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const strict = makeAjv({ coerceTypes: false });
  const coercing = makeAjv({ coerceTypes: 'array' });
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? strict : coercing;
    return ajv.compile(schema as object) as ReturnType<FastifySchemaCompiler<unknown>>;
  };
}

interface AjvLikeError { instancePath?: string; message?: string; params?: Record<string, unknown> }

/** Turns the first Ajv error into `field.path: message`, naming the offending field. */
export function describeValidationError(context: string | undefined, errors: AjvLikeError[]): string {
  const e = errors[0];
  if (!e) return `${context ?? 'request'} is invalid`;
  const segments = (e.instancePath ?? '').split('/').filter(Boolean).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const missing = e.params?.['missingProperty'];
  if (typeof missing === 'string') segments.push(missing);
  const extra = e.params?.['additionalProperty'];
  if (typeof extra === 'string') segments.push(extra);
  const field = segments.length ? segments.join('.') : (context ?? 'body');
  const message = typeof missing === 'string' ? 'is required' : typeof extra === 'string' ? 'is not allowed' : (e.message ?? 'is invalid');
  return `${context && segments.length ? `${context} ` : ''}${field}: ${message}`;
}
