/**
 * V8 flags the metrics service is launched with (npm start, the systemd unit, the peer benchmark). They are read
 * when the process starts, so they cannot be set from inside it. Two 4 MiB semi-spaces instead of V8's 16 MiB: the
 * request path's garbage is short-lived, and the larger young generation held ~36 MiB more resident memory under
 * ingest for about 5% more throughput (2 MiB cost twice the GC time for no further saving; docs/benchmarks.md); the writer thread sets its own young generation (worker-writer.ts).
 */
export const METRICS_NODE_FLAGS = ['--max-semi-space-size=4'] as const;
