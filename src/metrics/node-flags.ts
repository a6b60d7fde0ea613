/**
 * V8 flags the metrics service is launched with (npm start, the systemd unit, the peer benchmark). They are read
 * when the process starts, so they cannot be set from inside it. Two 2 MiB semi-spaces instead of V8's 16 MiB: the
 * request path's garbage is short-lived, and the larger young generation only held ~50 MiB of resident memory
 * (measured in docs/benchmarks.md); the writer thread sets its own young generation (worker-writer.ts).
 */
export const METRICS_NODE_FLAGS = ['--max-semi-space-size=2'] as const;
