import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { App } from '../../core/http/create-app.js';
import { documentedBodyCompiler } from '../../core/http/validation.js';
import type { AlertResult } from '../alerts/alert-router.js';
import { ingestReports, type IngestDeps } from '../domain/ingest.js';
import { authenticate, requestTenant } from '../http/authenticate.js';
import { clientGone } from '../http/client-gone.js';
import type { BulkLinePool } from '../http/bulk-line-pool.js';
import { MAX_BULK_REPORTS } from '../http/bulk-lines.js';
import { useNdjsonReportParser } from '../http/ndjson-report-parser.js';
import { requireParsedBody, requireSignatureHeader } from '../http/signed-json-parser.js';
import type { MetricsSelfMetrics } from '../self-metrics.js';
import type { DiskGuard } from '../../core/storage/disk-guard.js';
import { AlertResultsSchema } from './ingest.js';
import { AUTH_ERRORS, BEARER, errorResponses } from './schemas.js';

const LineResultSchema = Type.Object({
  line: Type.Integer({ minimum: 1, description: '1-based line number in the (decompressed) body.' }),
  status: Type.Union([Type.Literal('stored'), Type.Literal('duplicate'), Type.Literal('rejected')]),
  hostId: Type.Optional(Type.String({ description: 'The report\'s agentId, when the line was a valid report.' })),
  ts: Type.Optional(Type.Integer()),
  error: Type.Optional(Type.String({ description: 'For rejected lines: the code single ingest would answer (invalid_request, payload_too_large, limit_exceeded).' })),
  details: Type.Optional(Type.String({ description: 'For rejected lines: the details single ingest would answer.' })),
  alertResults: Type.Optional(AlertResultsSchema),
});

const BulkResponseSchema = Type.Object({
  stored: Type.Integer(),
  duplicates: Type.Integer(),
  rejected: Type.Integer(),
  results: Type.Array(LineResultSchema, { description: 'One entry per non-blank line, in order.' }),
});

/**
 * POST /api/v1/ingest/bulk: many reports in one NDJSON body (an agent
 * draining its spool). In its own plugin scope: its only body parser is the
 * NDJSON one, with the bulk body limit. The token is checked in onRequest,
 * before the body is read.
 */
export async function registerBulkIngestRoute(
  app: App,
  deps: IngestDeps & { secret: string | undefined; bodyLimit: number; bulkBodyLimit: number; bulkLines: BulkLinePool; selfMetrics: MetricsSelfMetrics; diskGuard: DiskGuard },
): Promise<void> {
  await app.register(async (plugin) => {
    const scope = plugin.withTypeProvider<TypeBoxTypeProvider>();
    const items = useNdjsonReportParser(scope, deps.secret, { bulkBodyLimit: deps.bulkBodyLimit, lineLimit: deps.bodyLimit }, deps.bulkLines, deps);
    scope.post('/api/v1/ingest/bulk', {
      config: { repeatable: true },
      onRequest: [authenticate(deps.store), deps.diskGuard.hook, requireSignatureHeader(deps.secret)],
      preValidation: requireParsedBody(deps.secret, 'application/x-ndjson'),
      // The body's lines are read and checked by bulk-lines.ts; its schema below documents them for OpenAPI.
      validatorCompiler: documentedBodyCompiler(),
      bodyLimit: deps.bulkBodyLimit,
      schema: {
        summary: 'Submit many agent reports (NDJSON)',
        description: `Body: \`application/x-ndjson\`, one agent report per line (blank lines ignored), at most ${MAX_BULK_REPORTS} reports and the bulk body limit (32 MiB by default), optionally \`Content-Encoding: gzip\` (the decompressed size is bounded by the same limit while inflating). Each line gets exactly the checks of POST /api/v1/ingest; all valid reports are stored with one durable commit, then their alerts are routed. A refused line never fails the others. Bulk reports are taken as a backlog: while they arrive faster than 1,000 a second, sealing closed windows into compressed blocks waits (up to 2 minutes); reads see the reports meanwhile. With a server secret, \`x-collector-signature\` is the HMAC-SHA256 of the body bytes as sent (compressed when gzipped).`,
        tags: ['ingest'],
        security: BEARER,
        consumes: ['application/x-ndjson'],
        body: Type.Array(Type.Unknown(), { description: 'NDJSON: one ReportSchema report (as for POST /api/v1/ingest) per line; documented as an array, sent as lines.' }),
        headers: Type.Object({ 'x-collector-signature': Type.Optional(Type.String({ description: 'hex HMAC-SHA256 of the body bytes as sent; required when the server has --secret.' })) }),
        response: {
          200: { ...BulkResponseSchema, description: 'Every line has an outcome in results; every alert of the stored reports delivered, or none to route.' },
          202: { ...BulkResponseSchema, description: 'As 200, but at least one alert could not be delivered; see the lines\' alertResults.' },
          ...errorResponses({
            invalid_request: 'The body holds no line, no line is JSON, or the gzip stream is corrupt.',
            unauthorized: 'Bad bearer token, or signature missing or mismatched while the server has a secret.',
            payload_too_large: `Body over the bulk body limit (as sent or once decompressed), or more than ${MAX_BULK_REPORTS} reports.`,
            unsupported_media_type: 'Content-Type is not application/x-ndjson, or Content-Encoding is neither gzip nor identity.',
            internal: AUTH_ERRORS.internal,
            unavailable: 'The server is shutting down; retry.',
          }),
        },
      },
    }, async (request, reply) => {
      const tenant = requestTenant(request);
      const result = await ingestReports(deps, tenant, await items(request, tenant.tenantId), clientGone(reply));
      deps.selfMetrics.ingestedReports.inc({ result: 'stored' }, result.stored);
      deps.selfMetrics.ingestedReports.inc({ result: 'duplicate' }, result.duplicates);
      deps.selfMetrics.ingestedSamples.inc(result.samples);
      // A loop, not a filtered array per line: a body's thousand lines rarely carry a failure.
      const failures: AlertResult[] = [];
      for (const r of result.results) if (r.status === 'stored') for (const a of r.alertResults) if (a.outcome === 'failed') failures.push(a);
      if (failures.length) request.log.warn({ failures }, 'alert delivery failed');
      const { samples: _samples, ...body } = result;
      return reply.code(failures.length ? 202 : 200).send(body);
    });
  });
}
