import { readFile } from 'node:fs/promises';
import { Ajv } from 'ajv';
import { Type, type Static } from 'typebox';
import { ConfigError } from '../../core/config.js';
import { describeValidationError } from '../../core/http/validation.js';
import { SeveritySchema, type Alert } from './alert.js';

/** Bounds on the operator's routes file, so a runaway file fails at start rather than per ingest. */
export const ROUTE_LIMITS = { maxRoutes: 64, maxHeaders: 16, headerValueLength: 4096 } as const;

/**
 * Headers the service sets itself, that describe its body or frame the request, or that fetch refuses outright
 * (keep-alive, upgrade, expect: every delivery would fail): a route may not set them.
 */
const RESERVED_HEADERS = new Set(['content-type', 'content-length', 'content-encoding', 'host', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'expect', 'user-agent']);

/**
 * What fetch can send as a header value: one byte per character, no control character but tab. Anything else
 * (a CR/LF pasted with a token) is refused at start: fetch would refuse it on every delivery, reported only as "connection failed".
 */
const HEADER_VALUE = /^[\t\x20-\x7e\xa0-\xff]*$/;

/** Prometheus-style durations: `0s`, `30s`, `5m`, `4h`, `1d`, `1h30m`, `500ms`. */
const DURATION = '^(?:\\d+(?:ms|s|m|h|d))+$';
const DURATION_UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Milliseconds of a duration that matched DURATION. */
export function parseDuration(text: string): number {
  let ms = 0;
  for (const m of text.matchAll(/(\d+)(ms|s|m|h|d)/g)) ms += Number(m[1]) * DURATION_UNITS[m[2]!]!;
  return ms;
}

/** Alertmanager's defaults, except group_wait: 0 keeps the first notification inside the ingest that raised it (202/alertResults). */
export const ROUTE_TIMING_DEFAULTS = { groupWaitMs: 0, repeatIntervalMs: 4 * 3_600_000, sendResolved: true } as const;

export interface RouteTiming {
  groupWaitMs: number;
  repeatIntervalMs: number;
  sendResolved: boolean;
}

export function routeTiming(route: AlertRoute): RouteTiming {
  return {
    groupWaitMs: route.group_wait === undefined ? ROUTE_TIMING_DEFAULTS.groupWaitMs : parseDuration(route.group_wait),
    repeatIntervalMs: route.repeat_interval === undefined ? ROUTE_TIMING_DEFAULTS.repeatIntervalMs : parseDuration(route.repeat_interval),
    sendResolved: route.send_resolved ?? ROUTE_TIMING_DEFAULTS.sendResolved,
  };
}

export const AlertRouteSchema = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.-]+$', description: 'Receiver name; sent as `receiver` in the payload and reported in alertResults.' }),
    match: Type.Optional(Type.Object(
      {
        severity: Type.Optional(Type.Array(SeveritySchema, { minItems: 1, uniqueItems: true, description: 'Any of these severities.' })),
        name: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'Glob on the alert name: `*` any run of characters, `?` one character; the whole name must match; case-sensitive.' })),
      },
      { additionalProperties: false, description: 'Every given condition must hold; an absent match routes every alert.' },
    )),
    url: Type.String({ minLength: 1, maxLength: 2048, description: 'http or https webhook URL; it receives an Alertmanager-style JSON POST.' }),
    group_wait: Type.Optional(Type.String({ pattern: DURATION, description: 'How long a new alert waits before its first notification, so alerts raised together travel together (Alertmanager\'s group_wait). Default 0s: the first notification goes out with the ingest that raised it.' })),
    repeat_interval: Type.Optional(Type.String({ pattern: DURATION, description: 'How long after a notification a still-firing alert is notified again. Default 4h.' })),
    send_resolved: Type.Optional(Type.Boolean({ description: 'Notify when a notified alert stops being reported. Default true.' })),
    headers: Type.Optional(Type.Record(
      Type.String({ pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$" }),
      Type.String({ maxLength: ROUTE_LIMITS.headerValueLength }),
      { maxProperties: ROUTE_LIMITS.maxHeaders, additionalProperties: false, description: 'Extra request headers, e.g. Authorization for the receiver.' },
    )),
  },
  { additionalProperties: false },
);

/** One operator-configured route: alerts it matches are POSTed to its webhook. */
export type AlertRoute = Static<typeof AlertRouteSchema>;

export const AlertRoutesFileSchema = Type.Object(
  { routes: Type.Array(AlertRouteSchema, { maxItems: ROUTE_LIMITS.maxRoutes }) },
  { additionalProperties: false },
);

/** Anchored glob: `*` and `?` are the only metacharacters, so no pattern can backtrack catastrophically. */
export function globMatches(glob: string, text: string): boolean {
  let g = 0;
  let t = 0;
  let starG = -1;
  let starT = 0;
  while (t < text.length) {
    // A `*` of the glob is a wildcard even where the text has a `*` too: it is tried before the literal match.
    if (g < glob.length && glob[g] === '*') { starG = g++; starT = t; }
    else if (g < glob.length && (glob[g] === '?' || glob[g] === text[t])) { g++; t++; }
    else if (starG !== -1) { g = starG + 1; t = ++starT; }
    else return false;
  }
  while (g < glob.length && glob[g] === '*') g++;
  return g === glob.length;
}

export function routeMatches(route: AlertRoute, alert: Alert): boolean {
  const m = route.match;
  if (m?.severity && !m.severity.includes(alert.severity)) return false;
  if (m?.name !== undefined && !globMatches(m.name, alert.name)) return false;
  return true;
}

const validateFile = new Ajv({ allErrors: true, strict: false }).compile(AlertRoutesFileSchema);

/**
 * Reads and validates the operator's JSON routes file (`{"routes": [...]}`).
 * No file configured means no routes: alerts are accepted and not sent
 * anywhere. Any problem stops the start with a `ConfigError` listing all of them.
 */
export async function loadAlertRoutes(file: string | undefined): Promise<AlertRoute[]> {
  if (file === undefined) return [];
  const fail = (problems: string[]): never => { throw new ConfigError(problems.map((p) => `alert routes file ${file}: ${p}`)); };
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e: unknown) {
    const code = (e as { code?: string }).code;
    return fail([code === 'ENOENT' ? 'does not exist' : `cannot be read (${code ?? String(e)})`]);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e: unknown) {
    return fail([`is not valid JSON (${e instanceof Error ? e.message : String(e)})`]);
  }
  if (!validateFile(parsed)) {
    return fail((validateFile.errors ?? []).map((err) => describeValidationError(undefined, [err])));
  }
  const problems = [...semanticProblems(parsed.routes)];
  if (problems.length) fail(problems);
  return parsed.routes;
}

function* semanticProblems(routes: AlertRoute[]): Generator<string> {
  const seen = new Set<string>();
  for (const [i, route] of routes.entries()) {
    if (seen.has(route.name)) yield `routes.${i}.name: "${route.name}" is used by an earlier route`;
    seen.add(route.name);
    let url: URL | undefined;
    try { url = new URL(route.url); } catch { yield `routes.${i}.url: is not a valid URL`; }
    if (url && url.protocol !== 'http:' && url.protocol !== 'https:') yield `routes.${i}.url: must use http or https`;
    const names = new Set<string>();
    for (const header of Object.keys(route.headers ?? {})) {
      if (RESERVED_HEADERS.has(header.toLowerCase())) yield `routes.${i}.headers.${header}: is set by the service or refused by its HTTP client, and cannot be configured`;
      // Header names are case-insensitive: two spellings would go out as one header of both values joined.
      else if (names.has(header.toLowerCase())) yield `routes.${i}.headers.${header}: is another spelling of a header named before it (header names ignore case)`;
      names.add(header.toLowerCase());
    }
    for (const [header, value] of Object.entries(route.headers ?? {})) {
      if (!HEADER_VALUE.test(value)) yield `routes.${i}.headers.${header}: the value may hold only tabs and printable Latin-1 characters (no CR, LF or other control character, nothing above U+00FF)`;
    }
  }
}
