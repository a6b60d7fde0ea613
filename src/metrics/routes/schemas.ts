import { Type } from 'typebox';
import { MAX_METRIC_NAME_LENGTH } from '../domain/flatten.js';

/** What every bearer-protected route can answer besides its own errors. */
export const AUTH_ERRORS = {
  unauthorized: 'Missing, malformed, unknown or revoked bearer token.',
  internal: 'Unexpected failure (logged; the body carries no detail).',
} as const;

/** What an expensive route (series, aggregate, top lists, sparklines) answers past the load-shedding bounds. */
export const LOAD_SHED_ERROR = {
  unavailable: 'Too many expensive requests in progress (for this tenant or on this instance), the event loop is stalled, or the server is shutting down; retry after `Retry-After` seconds.',
} as const;

/** The core's one bearer scheme and error helper, under the names the metrics routes use. */
export { BEARER_SECURITY as BEARER, errorResponses } from '../../core/http/openapi.js';

const Timestamp = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Epoch milliseconds.' });

/**
 * Up to `maxNames` comma-separated metric names, its length bound leaving room for each at the longest a metric name
 * may be: a shorter bound refused valid lists. (A URL that long meets the 16 KiB request-line limit first: a 431.)
 */
export function metricNameList(maxNames: number, description: string) {
  return Type.String({ minLength: 1, maxLength: maxNames * (MAX_METRIC_NAME_LENGTH + 1) - 1, pattern: `^[^,]+(,[^,]+){0,${maxNames - 1}}$`, description });
}

export const SeriesQuerySchema = Type.Object({
  from: Type.Optional({ ...Timestamp, description: 'Range start, epoch ms, inclusive. Default: `to` minus one hour.' }),
  to: Type.Optional({ ...Timestamp, description: 'Range end, epoch ms, inclusive. Default: now (or `from` when that is later).' }),
  points: Type.Optional(Type.Integer({ minimum: 1, description: 'Point budget (default and cap configured; 500 and 10000 by default).' })),
  minmax: Type.Optional(Type.Boolean({ description: 'Also return `min` and `max`: each point\'s smallest and largest raw value per metric. Default false.' })),
  metrics: Type.Optional(metricNameList(100,
    'Only these metrics: up to 100 comma-separated exact names (the ones a chart draws); points where none of them has a value are left out. Default: every metric.',
  )),
});

const SeriesFields = {
  from: Timestamp,
  to: Timestamp,
  points: Type.Integer({ description: 'The point budget applied.' }),
  bucketMs: Type.Union([Type.Integer(), Type.Null()], { description: 'Bucket width when points were averaged into buckets; null when every point is one report.' }),
  timestamps: Type.Array(Timestamp, { description: 'Report times, or bucket starts, ascending.' }),
  metrics: Type.Record(Type.String(), Type.Array(Type.Union([Type.Number(), Type.Null()])), {
    description: 'Metric name -> one value per timestamp (null where that point has no value for the metric).',
  }),
  min: Type.Optional(Type.Record(Type.String(), Type.Array(Type.Union([Type.Number(), Type.Null()])), {
    description: 'With minmax=true: metric name -> each point\'s smallest raw value (of any host, for the aggregate).',
  })),
  max: Type.Optional(Type.Record(Type.String(), Type.Array(Type.Union([Type.Number(), Type.Null()])), {
    description: 'With minmax=true: metric name -> each point\'s largest raw value.',
  })),
};

export const HostSeriesSchema = Type.Object({ hostId: Type.String(), ...SeriesFields }, { description: 'One host\'s series.' });
export const AggregateSeriesSchema = Type.Object({
  hosts: Type.Integer({ description: 'Hosts with at least one report in the range.' }),
  ...SeriesFields,
}, { description: 'Per bucket, the mean across hosts of each host\'s mean.' });
