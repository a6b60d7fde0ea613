import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { App } from '../../../src/core/http/create-app.js';
import { FUZZ_RUNS, fromSchema, hostile, hostileQuery, toJsonText } from './arbitraries.js';

type Schema = Record<string, unknown>;

/** One route as its OpenAPI operation describes it: what the fuzzer may send. */
export interface Operation {
  method: string;
  /** OpenAPI path, e.g. `/api/v1/host/{id}`. */
  path: string;
  body: Schema | undefined;
  query: { name: string; schema: Schema }[];
}

interface OpenApiParameter { in: string; name: string; schema?: Schema }
interface OpenApiOperation { parameters?: OpenApiParameter[]; requestBody?: { content?: Record<string, { schema?: Schema }> } }

/**
 * Every operation of the app's OpenAPI document, which @fastify/swagger
 * builds from the very schemas the routes validate with: a route added with
 * a body or query schema is fuzzed without anyone listing it here.
 */
export function operations(app: App): Operation[] {
  const doc = app.swagger() as { paths: Record<string, Record<string, OpenApiOperation>> };
  const out: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const query = (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => ({ name: p.name, schema: p.schema ?? {} }));
      out.push({ method: method.toUpperCase(), path, body: op.requestBody?.content?.['application/json']?.schema, query });
    }
  }
  return out;
}

export interface FuzzTarget {
  url: string;
  /** Headers of every request (credentials, X-Business-ID). */
  headers: Record<string, string>;
  /** Concrete value of a path parameter. */
  param(op: Operation, name: string): string;
  /** Makes a generated valid body more often meaningful (a recent ts, the fuzzer's own business). */
  fixBody?(op: Operation, body: unknown): unknown;
  /** What is stored, read through the API: a 4xx must leave it unchanged. */
  fingerprint(): Promise<unknown>;
}

export interface Sent { status: number; text: string }

async function send(url: string, method: string, headers: Record<string, string>, body: string | undefined): Promise<Sent> {
  const res = await fetch(url, { method, headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' }, body });
  return { status: res.status, text: await res.text() };
}

/**
 * Never a 5xx; the JSON error shape on every error; a 4xx leaves what is
 * stored as it was after the last success (read again after each 2xx).
 */
async function checkReply(target: FuzzTarget, r: Sent, known: { value: unknown }, what: string): Promise<void> {
  assert.ok(r.status < 500, `${what}: ${r.status} ${r.text.slice(0, 300)}`);
  if (r.status >= 400) {
    const body = JSON.parse(r.text) as { error?: unknown };
    assert.equal(typeof body.error, 'string', `${what}: error body ${r.text.slice(0, 200)}`);
    assert.deepEqual(await target.fingerprint(), known.value, `${what}: a ${r.status} changed what is stored`);
  } else {
    known.value = await target.fingerprint();
  }
}

function concretePath(target: FuzzTarget, op: Operation): string {
  return op.path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(target.param(op, name)));
}

/** Fuzzes the body of `op` with schema-valid values and hostile mutations of them. */
export async function fuzzBody(target: FuzzTarget, op: Operation): Promise<void> {
  const valid = fromSchema(op.body!).map((v) => target.fixBody?.(op, v) ?? v);
  const known = { value: await target.fingerprint() };
  await fc.assert(fc.asyncProperty(hostile(valid), async (value) => {
    const text = toJsonText(value);
    const r = await send(target.url + concretePath(target, op), op.method, target.headers, text);
    await checkReply(target, r, known, `${op.method} ${op.path} body ${text.slice(0, 200)}`);
  }), { numRuns: FUZZ_RUNS });
}

/**
 * Fuzzes the query string of `op` (even one without declared parameters). A
 * GET must change nothing whatever it answers, so what is stored is compared
 * once after all its runs; other methods are checked after every 4xx.
 */
export async function fuzzQuery(target: FuzzTarget, op: Operation): Promise<void> {
  const body = op.body ? toJsonText(fc.sample(fromSchema(op.body).map((v) => target.fixBody?.(op, v) ?? v), { numRuns: 1, seed: 1 })[0]) : undefined;
  const known = { value: await target.fingerprint() };
  const before = known.value;
  await fc.assert(fc.asyncProperty(hostileQuery(op.query), async (qs) => {
    const r = await send(`${target.url}${concretePath(target, op)}?${qs}`, op.method, target.headers, body);
    const what = `${op.method} ${op.path}?${qs.slice(0, 200)}`;
    if (op.method !== 'GET') return checkReply(target, r, known, what);
    assert.ok(r.status < 500, `${what}: ${r.status} ${r.text.slice(0, 300)}`);
    if (r.status >= 400) assert.equal(typeof (JSON.parse(r.text) as { error?: unknown }).error, 'string', `${what}: error body ${r.text.slice(0, 200)}`);
  }), { numRuns: FUZZ_RUNS });
  if (op.method === 'GET') assert.deepEqual(await target.fingerprint(), before, `${op.method} ${op.path}: a GET changed what is stored`);
}
