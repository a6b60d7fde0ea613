import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { App } from '../../core/http/create-app.js';
import { ingestReport, type IngestDeps } from '../domain/ingest.js';
import { ReportSchema } from '../domain/report-schema.js';
import { authenticate, requestTenant } from '../http/authenticate.js';
import { clientGone } from '../http/client-gone.js';
import { requireParsedBody, requireSignatureHeader, useSignedJsonParser } from '../http/signed-json-parser.js';
import { AUTH_ERRORS, BEARER, errorResponses } from './schemas.js';
import type { MetricsSelfMetrics } from '../self-metrics.js';
import type { DiskGuard } from '../../core/storage/disk-guard.js';

const AlertResultSchema = Type.Object({
  alert: Type.String({ description: 'Alert name.' }),
  route: Type.String({ description: 'Route name from the routes file.' }),
  outcome: Type.Union([Type.Literal('delivered'), Type.Literal('failed')]),
  status: Type.Optional(Type.Integer({ description: 'HTTP status the receiver answered.' })),
  error: Type.Optional(Type.String({ description: 'Why delivery failed.' })),
  resolved: Type.Optional(Type.Literal(true, { description: 'A resolved notification: the alert is no longer reported.' })),
});

export const AlertResultsSchema = Type.Array(AlertResultSchema, { description: 'One entry per alert and matching route.' });

const IngestResponseSchema = Type.Object({
  hostId: Type.String({ description: 'The host id: the report\'s agentId.' }),
  ts: Type.Integer(),
  metrics: Type.Integer({ description: 'Metrics stored from this report.' }),
  duplicate: Type.Boolean({ description: 'True when this host already reported this ts; nothing changed and alerts were not routed again.' }),
  alertResults: AlertResultsSchema,
});

/**
 * POST /api/v1/ingest. In its own plugin scope, so its JSON parser (which
 * checks the signature on the raw bytes) serves this route only. The token is
 * checked in onRequest, before the body is even read.
 */
export async function registerIngestRoute(app: App, deps: IngestDeps & { secret: string | undefined; bodyLimit: number; selfMetrics: MetricsSelfMetrics; diskGuard: DiskGuard }): Promise<void> {
  await app.register(async (plugin) => {
    const scope = plugin.withTypeProvider<TypeBoxTypeProvider>();
    useSignedJsonParser(scope, deps.secret, deps.bodyLimit);
    scope.post('/api/v1/ingest', {
      config: { repeatable: true },
      onRequest: [authenticate(deps.store), deps.diskGuard.hook, requireSignatureHeader(deps.secret)],
      preValidation: requireParsedBody(deps.secret, 'application/json'),
      schema: {
        summary: 'Submit one agent report',
        description: 'Stores the report (durably, before answering), then routes its alerts. The body may be sent with `Content-Encoding: gzip` (decompressed size bounded by the body limit). When the server has a secret, `x-collector-signature` must be the hex HMAC-SHA256 of the raw body as sent (the compressed bytes when gzipped), optionally prefixed `sha256=`.',
        tags: ['ingest'],
        security: BEARER,
        headers: Type.Object({ 'x-collector-signature': Type.Optional(Type.String({ description: 'hex HMAC-SHA256 of the body bytes; required when the server has --secret.' })) }),
        body: ReportSchema,
        response: {
          200: { ...IngestResponseSchema, description: 'Stored (or a duplicate of a stored report); every alert delivered, or none to route.' },
          202: { ...IngestResponseSchema, description: 'Stored, but at least one alert could not be delivered; see alertResults.' },
          ...errorResponses({
            invalid_request: 'Malformed JSON, a field of the wrong type or out of range (named in details), ts too far ahead or older than the retention.',
            unauthorized: 'Bad bearer token, or signature missing or mismatched while the server has a secret.',
            payload_too_large: 'Body over the configured limit (1 MiB by default), as sent or once decompressed.',
            unsupported_media_type: 'Content-Type is not application/json, or Content-Encoding is neither gzip nor identity.',
            limit_exceeded: 'The report would take its host or tenant past the distinct metric name limit, or (a new host) its tenant past the host limit; nothing was stored.',
            internal: AUTH_ERRORS.internal,
            unavailable: 'The server is shutting down; retry.',
          }),
        },
      },
    }, async (request, reply) => {
      const result = await ingestReport(deps, requestTenant(request), request.body, clientGone(reply));
      deps.selfMetrics.ingestedReports.inc({ result: result.duplicate ? 'duplicate' : 'stored' });
      if (!result.duplicate) deps.selfMetrics.ingestedSamples.inc(result.metrics);
      const failures = result.alertResults.filter((r) => r.outcome === 'failed');
      // The agent learns of failures from the 202; the operator needs them in the service's own log.
      if (failures.length) request.log.warn({ hostId: result.hostId, failures }, 'alert delivery failed');
      return reply.code(failures.length ? 202 : 200).send(result);
    });
  });
}
