import fc from 'fast-check';

/** Raw JSON text spliced into a body as is: what JSON.stringify cannot write (1e999, 3000-deep nesting). */
export class RawJson {
  constructor(readonly text: string) {}
}

type Schema = Record<string, unknown>;

/** Test runs per property: small in CI, `FUZZ_RUNS=2000` for a long run. */
export const FUZZ_RUNS = Number(process.env['FUZZ_RUNS'] ?? 25);

/**
 * Values valid for a JSON schema (as the routes' TypeBox schemas are, or as
 * @fastify/swagger publishes them): objects with their required properties
 * and some optional ones, bounded strings and arrays, integers in range,
 * strings matching their pattern. Unknown shapes fall back to any JSON.
 */
export function fromSchema(schema: Schema, depth = 0): fc.Arbitrary<unknown> {
  if (depth > 6) return fc.constant(null);
  if ('const' in schema) return fc.constant(schema['const']);
  if (Array.isArray(schema['enum'])) return fc.constantFrom(...(schema['enum'] as unknown[]));
  for (const key of ['anyOf', 'oneOf'] as const) {
    const list = schema[key];
    if (Array.isArray(list) && list.length) return fc.oneof(...(list as Schema[]).map((s) => fromSchema(s, depth + 1)));
  }
  const type = Array.isArray(schema['type']) ? (schema['type'] as string[])[0] : schema['type'];
  switch (type) {
    case 'object': return objectOf(schema, depth);
    case 'array': {
      const items = (schema['items'] ?? {}) as Schema;
      const min = Number(schema['minItems'] ?? 0);
      const max = Math.min(Number(schema['maxItems'] ?? 5), min + 5);
      return fc.array(fromSchema(items, depth + 1), { minLength: min, maxLength: max });
    }
    case 'string': return stringOf(schema);
    case 'integer': return fc.integer({ min: Math.max(Number(schema['minimum'] ?? -1e9), -1e15), max: Math.min(Number(schema['maximum'] ?? 1e9), 1e15) });
    case 'number': return fc.double({ min: Number(schema['minimum'] ?? -1e9), max: Number(schema['maximum'] ?? 1e9), noNaN: true, noDefaultInfinity: true });
    case 'boolean': return fc.boolean();
    case 'null': return fc.constant(null);
    default: return fc.jsonValue({ maxDepth: 2 });
  }
}

function objectOf(schema: Schema, depth: number): fc.Arbitrary<unknown> {
  const properties = (schema['properties'] ?? {}) as Record<string, Schema>;
  const required = new Set((schema['required'] ?? []) as string[]);
  const record: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [name, s] of Object.entries(properties)) record[name] = fromSchema(s, depth + 1);
  const requiredKeys = Object.keys(properties).filter((k) => required.has(k));
  return fc.record(record, { requiredKeys });
}

function stringOf(schema: Schema): fc.Arbitrary<string> {
  const min = Number(schema['minLength'] ?? 0);
  const max = Math.min(Number(schema['maxLength'] ?? 40), min + 40);
  const fit = (s: string) => [...s].length >= min && [...s].length <= Number(schema['maxLength'] ?? Infinity);
  if (schema['format'] === 'email') return fc.emailAddress().filter((s) => s.length <= max + 200);
  if (schema['format'] === 'date-time') return fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }).map((d) => d.toISOString());
  if (schema['format'] === 'uuid') return fc.uuid();
  const pattern = schema['pattern'];
  if (typeof pattern === 'string') {
    const full = new RegExp(pattern, 'u');
    // fast-check generates from most patterns, but not from lookarounds or negated Unicode property classes:
    // then without the lookarounds, or from any text, keeping what the full pattern accepts.
    const candidates = [
      () => fc.stringMatching(full),
      () => fc.stringMatching(new RegExp(pattern.replace(/\(\?[!=][^)]*\)/g, ''), 'u')),
      () => fc.string({ minLength: min, maxLength: max, unit: 'grapheme' }),
    ];
    for (const make of candidates) {
      try {
        const arb = make().filter((s) => full.test(s) && fit(s));
        fc.sample(arb, { numRuns: 3, seed: 42 });
        return arb;
      } catch { /* the next way to generate */ }
    }
  }
  return fc.string({ minLength: min, maxLength: max, unit: 'binary' }).filter(fit);
}

/** Strings an attacker tries in any text field. */
export const HOSTILE_STRINGS = [
  '', ' ', '\u0000', 'a\u0000b', '\ud800', 'x\udc00y', '\udbff\udfff', '\u202egnp.exe', '\u200b', '\ufeff',
  'line\r\nX-Injected: 1', '\u001b[2J', "' OR 1=1 --", '"; DROP TABLE users; --', "'); DELETE FROM changes; --",
  '%00', '%27', '../../../etc/passwd', '..\\..\\windows', '<script>alert(1)</script>', '${jndi:ldap://x}', '{{7*7}}',
  '__proto__', 'constructor', 'prototype', 'NaN', 'Infinity', '-0', '0x10', '1e999', 'null', 'true', '[]', '{}',
  'é'.repeat(300), '🚀'.repeat(200), 'x'.repeat(70_000),
];

/** Values of the wrong type, or numbers JSON.stringify cannot carry. */
export const HOSTILE_VALUES: unknown[] = [
  null, true, false, 0, -1, -0, 1.5, 2 ** 53 + 1, Number.MAX_VALUE, Number.MIN_VALUE, [], {}, [null], { a: 1 },
  new RawJson('1e999'), new RawJson('-1e999'), new RawJson('1' + '0'.repeat(400)), new RawJson('0.' + '0'.repeat(400) + '1'),
  new RawJson('[' .repeat(3000) + ']'.repeat(3000)), new RawJson('{"a":'.repeat(2000) + '1' + '}'.repeat(2000)),
  new RawJson('[' .repeat(100) + ']'.repeat(100)),
  new RawJson('{"__proto__":{"admin":true,"isAdmin":true}}'), new RawJson('{"constructor":{"prototype":{"admin":true}}}'),
  new RawJson('{"a":1,"a":2}'), new RawJson('"\\ud800"'), new RawJson('"\\u0000"'),
  Array.from({ length: 5000 }, (_, i) => i), Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`k${i}`, i])),
];

const hostileLeaf: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(...HOSTILE_STRINGS),
  fc.constantFrom(...HOSTILE_VALUES),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.jsonValue({ maxDepth: 3 }),
);

/** Replaces, adds or removes one value somewhere in `value`, by a path drawn from `pick`. */
function mutateAt(value: unknown, choices: number[], replacement: unknown, how: number): unknown {
  if (value === null || typeof value !== 'object' || !choices.length) return how % 5 === 4 ? value : replacement;
  const [choice, ...rest] = choices as [number, ...number[]];
  if (Array.isArray(value)) {
    if (!value.length) return [replacement];
    const copy = [...value];
    const i = choice % copy.length;
    copy[i] = rest.length && typeof copy[i] === 'object' ? mutateAt(copy[i], rest, replacement, how) : replacement;
    return copy;
  }
  const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  const keys = Object.keys(copy);
  if (how % 5 === 0 || !keys.length) {
    // An extra key, sometimes one that names a prototype.
    const key = ['__proto__', 'constructor', 'prototype', 'extra', "x' OR '1'='1", '\ud800', 'a\u0000'][choice % 7]!;
    Object.defineProperty(copy, key, { value: replacement, enumerable: true, writable: true, configurable: true });
    return copy;
  }
  const key = keys[choice % keys.length]!;
  if (how % 5 === 1) {
    delete copy[key];
    return copy;
  }
  copy[key] = rest.length && typeof copy[key] === 'object' && copy[key] !== null ? mutateAt(copy[key], rest, replacement, how) : replacement;
  return copy;
}

/** A valid value, or that value with one hostile change at a random depth (4 times in 5). */
export function hostile(valid: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 1, arbitrary: valid },
    { weight: 4, arbitrary: fc.tuple(valid, fc.array(fc.nat(), { minLength: 0, maxLength: 5 }), hostileLeaf, fc.nat()).map(([v, path, leaf, how]) => mutateAt(v, path, leaf, how)) },
    { weight: 1, arbitrary: hostileLeaf },
  );
}

/** JSON text of `value`, RawJson leaves spliced in verbatim. */
export function toJsonText(value: unknown): string {
  const raws: string[] = [];
  const text = JSON.stringify(value, (_k, v: unknown) => {
    if (v instanceof RawJson) {
      raws.push(v.text);
      return `\u0001RAW${raws.length - 1}\u0001`;
    }
    return v;
  });
  return (text ?? 'null').replace(/"\\u0001RAW(\d+)\\u0001"/g, (_, i: string) => raws[Number(i)]!);
}

/** Query-string values an attacker tries, already URL-encoded where that matters. */
export const HOSTILE_QUERY_VALUES = [
  '0x10', '%201', '1%20', '1e3', '-1', '+1', '1.5', 'NaN', 'Infinity', '', '%00', '%ED%A0%80', '%FF', '%', '%%', '%u0041',
  '99999999999999999999999', '9007199254740993', '-0', 'true', 'null', '[]', '%5B%5D', '%27%20OR%201%3D1--', '..%2F..%2F', 'x'.repeat(5000),
];

/**
 * A query string for the given parameters: valid values from their schemas,
 * hostile values, repeated parameters, unknown and prototype-named ones.
 */
export function hostileQuery(params: { name: string; schema: Schema }[]): fc.Arbitrary<string> {
  const pair = params.length
    ? fc.tuple(fc.constantFrom(...params), fc.oneof(fc.constantFrom(...HOSTILE_QUERY_VALUES), fc.string({ maxLength: 12 }).map(encodeURIComponent)))
      .map(([p, v]) => `${p.name}=${v}`)
    : fc.constant('');
  const valid = params.length
    ? fc.tuple(...params.map((p) => fc.option(fromSchema(p.schema), { nil: undefined }).map((v) => (v === undefined ? '' : `${p.name}=${encodeURIComponent(String(v))}`))))
      .map((parts) => parts.filter(Boolean).join('&'))
    : fc.constant('');
  const odd = fc.constantFrom('__proto__=1', 'constructor[prototype][admin]=1', '__proto__[admin]=1', 'a[b][c][d][e][f]=1', '&&&', '=', '==1', 'x=1;y=2');
  return fc.tuple(valid, fc.array(fc.oneof(pair, odd), { maxLength: 3 })).map(([v, extra]) => [v, ...extra].filter(Boolean).join('&'));
}
