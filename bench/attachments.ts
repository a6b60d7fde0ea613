// Attachment transfer benchmark: what a resumable upload costs against the one-request multipart upload, and what a
// download does, on SQLite (files on local disk) and PostgreSQL (the PostgreSQL blob store), the service in this
// process on a loopback port.
//
//   npm run bench -- attachments [--mib 25] [--runs 5] [--piece-mib 1] [--backends sqlite,postgres]
//
// PostgreSQL: database bench_sync at 127.0.0.1 (created if missing; BENCH_DATABASE_URL to change).
import { randomBytes, randomUUID } from 'node:crypto';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { loadSyncConfig } from '../src/sync/config.js';
import { jsonRequest } from './lib/json-request.js';
import { startBenchSync } from './lib/sync-service.js';
import { quantile } from './lib/numbers.js';

const PG_URL = process.env['BENCH_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/bench_sync';
const OCTETS = 'application/offset+octet-stream';

interface Options { bytes: number; runs: number; piece: number }
/** Median seconds per way of transferring the file, and the service's CPU seconds per MiB for each. */
type Timings = Record<Way, { seconds: number; cpuPerMib: number }>;
type Way = 'multipart' | 'resumable, one request' | 'resumable, pieces' | 'download';
const WAYS: Way[] = ['multipart', 'resumable, one request', 'resumable, pieces', 'download'];

export async function run(argv: string[]): Promise<string> {
  const { values } = parseArgs({
    args: argv,
    options: {
      mib: { type: 'string', default: '25' },
      runs: { type: 'string', default: '5' },
      'piece-mib': { type: 'string', default: '1' },
      backends: { type: 'string', default: 'sqlite,postgres' },
    },
  });
  const o: Options = { bytes: Number(values.mib) * 2 ** 20, runs: Number(values.runs), piece: Number(values['piece-mib']) * 2 ** 20 };
  const load = os.loadavg()[0]!.toFixed(1);
  const results: [string, Timings][] = [];
  for (const backend of values.backends.split(',')) results.push([backend, await runBackend(backend as 'sqlite' | 'postgres', o)]);
  const mib = o.bytes / 2 ** 20;
  return [
    `Command: \`npm run bench -- attachments --mib ${values.mib} --runs ${o.runs} --piece-mib ${values['piece-mib']}\``,
    '',
    `One ${mib} MiB file, ${o.runs} times each way, median. Multipart: \`POST /api/sync/attachment\`. Resumable: \`POST /api/sync/uploads\`,`,
    `then the bytes in one PATCH (that one piece becomes the attachment as it is), or in PATCHes of ${values['piece-mib']} MiB (${Math.ceil(o.bytes / o.piece)} pieces, which`,
    'the last PATCH joins into the attachment: one more read and write of the file, fsynced, before it answers). Download: the whole file. The time is from the first',
    'request to the last answer; CPU is this process\'s (service and client) per MiB. On PostgreSQL the bytes live in the database',
    `(256 KiB chunks). Load average at the start: ${load}. A CPU profile (\`node --cpu-prof\`) puts most of the multipart column's extra CPU in`,
    'the client: fetch streaming a FormData body out of a Blob (undici\'s Blob reads and copies, and the garbage they make), not the service\'s',
    'multipart parser (busboy: 0.2 % of the time); the resumable columns send a Buffer.',
    '',
    `| Backend | ${WAYS.map((w) => `${w} (MiB/s)`).join(' | ')} |`,
    `| --- | ${WAYS.map(() => '---:').join(' | ')} |`,
    ...results.map(([b, t]) => `| ${b} | ${WAYS.map((w) => `${(mib / t[w].seconds).toFixed(0)} (${(t[w].cpuPerMib * 1000).toFixed(1)} ms CPU/MiB)`).join(' | ')} |`),
  ].join('\n');
}

async function runBackend(backend: 'sqlite' | 'postgres', o: Options): Promise<Timings> {
  const svc = await startBenchSync(backend, PG_URL, { attachmentMaxBytes: Math.max(o.bytes, loadSyncConfig().attachmentMaxBytes) });
  const { url, token, businessId } = svc;
  try {
    const headers = { authorization: `Bearer ${token}`, 'x-business-id': businessId };
    const file = randomBytes(o.bytes);
    const times: Record<Way, number[]> = { multipart: [], 'resumable, one request': [], 'resumable, pieces': [], download: [] };
    const cpu: Record<Way, number[]> = { multipart: [], 'resumable, one request': [], 'resumable, pieces': [], download: [] };
    let stored = '';
    const timed = async (way: Way, work: () => Promise<void>) => {
      const c = process.cpuUsage();
      const t = performance.now();
      await work();
      times[way].push((performance.now() - t) / 1000);
      const used = process.cpuUsage(c);
      cpu[way].push((used.user + used.system) / 1e6 / (o.bytes / 2 ** 20));
    };
    for (let i = 0; i < o.runs; i++) {
      await timed('multipart', async () => {
        const form = new FormData();
        form.append('record_type', 'invoice');
        form.append('record_uuid', randomUUID());
        form.append('file', new Blob([file]), 'bench.bin');
        const r = await fetch(`${url}/api/sync/attachment`, { method: 'POST', headers, body: form });
        if (r.status !== 201) throw new Error(`multipart: ${r.status} ${await r.text()}`);
        stored = String(((await r.json()) as Record<string, unknown>)['uuid']);
      });
      for (const [way, piece] of [['resumable, one request', o.bytes], ['resumable, pieces', o.piece]] as const) {
        await timed(way, async () => {
          const session = await jsonRequest(url, 'POST', '/api/sync/uploads', token, { record_type: 'invoice', record_uuid: randomUUID(), filename: 'bench.bin', size: o.bytes }, businessId);
          for (let at = 0; at < o.bytes; at += piece) {
            const r = await fetch(`${url}/api/sync/uploads/${String(session['id'])}`, {
              method: 'PATCH', headers: { ...headers, 'content-type': OCTETS, 'upload-offset': String(at) }, body: file.subarray(at, at + piece),
            });
            if (r.status !== 200) throw new Error(`PATCH: ${r.status} ${await r.text()}`);
            await r.arrayBuffer();
          }
        });
      }
      await timed('download', async () => {
        const r = await fetch(`${url}/api/sync/attachment/${stored}`, { headers });
        const got = Buffer.from(await r.arrayBuffer());
        if (got.length !== o.bytes) throw new Error(`download: ${got.length} bytes`);
      });
    }
    const median = (xs: number[]) => quantile([...xs].sort((a, b) => a - b), 0.5);
    return Object.fromEntries(WAYS.map((w) => [w, { seconds: median(times[w]), cpuPerMib: median(cpu[w]) }])) as Timings;
  } finally {
    await svc.close();
  }
}


