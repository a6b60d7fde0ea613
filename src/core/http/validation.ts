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

/** The only spellings a number may take in a query string, path or header: plain decimal, no sign but `-`, no spaces. */
const DECIMAL_INTEGER = /^-?[0-9]+$/;
const DECIMAL_NUMBER = /^-?[0-9]+(\.[0-9]+)?$/;

interface AjvLikeError { instancePath?: string; message?: string; params?: Record<string, unknown> }
type TextValidator = ((data: unknown) => boolean) & { errors?: AjvLikeError[] | null };
type SchemaNode = Record<string, unknown>;

/**
 * Bodies are validated strictly: a JSON string is never coerced into a number,
 * so wrong types are reported instead of silently converted. Query strings,
 * path parameters and headers arrive as text, so those are coerced, but only
 * from decimal text: Ajv would read `0x10` as 16, ` 1` as 1, `1e3` as 1000
 * and `Infinity` as a number, which a client never means (and a cache or a
 * proxy would key differently from us).
 */
export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const strict = makeAjv({ coerceTypes: false });
  const coercing = makeAjv({ coerceTypes: 'array' });
  return ({ schema, httpPart }) => {
    if (httpPart === 'body') return strict.compile(schema as object) as ReturnType<FastifySchemaCompiler<unknown>>;
    return decimalOnly(schema as SchemaNode, coercing.compile(schema as object) as TextValidator) as ReturnType<FastifySchemaCompiler<unknown>>;
  };
}

/**
 * The compiler of a route whose body is read and checked by its own code as it streams in (a multipart upload, an
 * NDJSON body): its `body` schema documents it for OpenAPI and is not run; the other parts are validated as anywhere.
 */
export function documentedBodyCompiler(): FastifySchemaCompiler<unknown> {
  const compile = validatorCompiler();
  return (route) => (route.httpPart === 'body' ? () => true : compile(route));
}

/** Wraps a coercing validator of a text part (query, params, headers) so numeric properties accept only decimal text. */
function decimalOnly(schema: SchemaNode, validate: TextValidator): TextValidator {
  const properties = (schema['properties'] ?? {}) as Record<string, SchemaNode>;
  const numeric = Object.entries(properties)
    .map(([name, s]) => [name, numericPattern(s)] as const)
    .filter((e): e is readonly [string, RegExp] => e[1] !== undefined);
  if (!numeric.length) return validate;
  const wrapped: TextValidator = (data: unknown) => {
    if (data !== null && typeof data === 'object') {
      for (const [name, pattern] of numeric) {
        const raw = (data as Record<string, unknown>)[name];
        const texts = Array.isArray(raw) ? raw : [raw];
        if (texts.some((t) => typeof t === 'string' && !pattern.test(t))) {
          wrapped.errors = [{ instancePath: `/${name}`, message: pattern === DECIMAL_INTEGER ? 'must be a decimal integer' : 'must be a decimal number' }];
          return false;
        }
      }
    }
    const ok = validate(data);
    wrapped.errors = validate.errors ?? null;
    return ok;
  };
  return wrapped;
}

/**
 * The decimal pattern a property's text must match when its schema only
 * admits numbers (directly, as array items, or in a union of numbers). A
 * property that also admits a string is left to Ajv: no route has one.
 */
function numericPattern(s: SchemaNode): RegExp | undefined {
  const types = new Set<string>();
  const collect = (node: SchemaNode | undefined) => {
    if (!node) return;
    const t = node['type'];
    if (typeof t === 'string') types.add(t);
    else if (Array.isArray(t)) for (const x of t) types.add(String(x));
    for (const key of ['anyOf', 'oneOf'] as const) {
      const list = node[key];
      if (Array.isArray(list)) for (const sub of list) collect(sub as SchemaNode);
    }
    if (node['type'] === 'array') collect(node['items'] as SchemaNode | undefined);
  };
  collect(s);
  if (types.has('string') || (!types.has('integer') && !types.has('number'))) return undefined;
  return types.has('number') ? DECIMAL_NUMBER : DECIMAL_INTEGER;
}

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
