#!/usr/bin/env node
// Throughput of `kakeya serve` by concurrency, speculation on and off (a
// benchmark, not a test):
//   scripts/serve-bench.mjs [--clients 1,2,4,8] [--specs none,auto] [--requests 4] [--tokens 128]
//                           [--bin build/bin/kakeya] [-- serve flags, e.g. -m model.gguf -t 2]
// For each --spec it starts one server with as many slots as the most
// clients, then for each client count runs that many streaming clients, each
// sending --requests greedy completions of --tokens tokens (prompts of
// Python from a fixed list, so runs compare), one after another. Prints per
// (spec, clients): aggregate generated tok/s over the wall time, mean time
// to first token, mean accepted draft length, and the draft policy's choice
// (/metrics kakeya_drafts_per_slot) at that concurrency, and from /metrics
// the forwards' rows and milliseconds and the share of the wall time spent in
// them; --json prints the rows.
import { performance } from 'node:perf_hooks';

import { metric, readMetrics, sseChunks, startServer } from '../tests/server/server_process.mjs';

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const CLIENTS = flag('--clients', '1,2,4,8').split(',').map(Number);
const SPECS = flag('--specs', 'none,auto').split(',');
const REQUESTS = Number(flag('--requests', 4));
const TOKENS = Number(flag('--tokens', 128));
const BIN = flag('--bin', new URL('../build/bin/kakeya', import.meta.url).pathname);
const SERVE_FLAGS = args.includes('--') ? args.slice(args.indexOf('--') + 1) : [];
const PROMPTS = ['def parse_args(', 'import os\nimport sys\n\n', 'class Config:\n    def __init__(self', 'def main():\n    ',
  'for i in range(', 'with open(path) as f:\n', 'def read_csv(path', 'try:\n    import json\n'];

// One streamed completion: its time to first token and its generated tokens.
async function streamOnce(url, prompt) {
  const t0 = performance.now();
  const response = await fetch(`${url}/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: TOKENS, temperature: 0, stream: true,
      stream_options: { include_usage: true } }),
  });
  let ttft = null;
  let usage = null;
  let spec = null;
  for await (const chunk of sseChunks(response)) {
    if (ttft === null && chunk.choices[0]?.text) ttft = performance.now() - t0;
    if (chunk.usage) usage = chunk.usage;
    if (chunk.kakeya) spec = chunk.kakeya.speculative;
  }
  return { ttft: ttft ?? performance.now() - t0, tokens: usage?.completion_tokens ?? 0, spec };
}

const rows = [];
for (const spec of SPECS) {
  const server = await startServer(BIN, ['--spec', spec, '--slots', String(Math.max(...CLIENTS)), ...SERVE_FLAGS]);
  await streamOnce(server.url, PROMPTS[0]);  // warm-up
  let before = await readMetrics(server.url);
  for (const clients of CLIENTS) {
    const t0 = performance.now();
    const results = (await Promise.all(Array.from({ length: clients }, async (_, c) => {
      const out = [];
      for (let r = 0; r < REQUESTS; r++) out.push(await streamOnce(server.url, PROMPTS[(c + r * clients) % PROMPTS.length]));
      return out;
    }))).flat();
    const seconds = (performance.now() - t0) / 1000;
    const tokens = results.reduce((a, r) => a + r.tokens, 0);
    const steps = results.reduce((a, r) => a + (r.spec?.steps ?? 0), 0);
    const accepted = results.reduce((a, r) => a + (r.spec?.accepted ?? 0), 0);
    const m = await readMetrics(server.url);
    const delta = (name) => metric(m, name) - metric(before, name);
    const nSteps = delta('kakeya_steps_total');
    const busySeconds = delta('kakeya_busy_seconds_total');
    const stepRows = delta('kakeya_step_rows_total');
    before = m;
    rows.push({
      spec, clients, tok_s: tokens / seconds,
      ttft_ms: results.reduce((a, r) => a + r.ttft, 0) / results.length,
      mean_accept_len: steps > 0 ? (steps + accepted) / steps : null,
      drafts_per_slot: metric(m, `kakeya_drafts_per_slot{decoding_slots="${clients}"}`),
      // The scheduler's side: rows per forward, ms per forward, and the share
      // of the wall time spent in forwards (the rest: HTTP, queueing, idle).
      rows_per_step: nSteps > 0 ? stepRows / nSteps : 0,
      ms_per_step: nSteps > 0 ? 1000 * busySeconds / nSteps : 0,
      busy_share: busySeconds / seconds,
    });
  }
  await server.terminate();
}

if (args.includes('--json')) {
  console.log(JSON.stringify(rows, null, 2));
} else {
  console.log('spec   clients   tok/s   ttft ms   accept len   drafts/slot   rows/step   ms/step   busy');
  for (const r of rows) {
    console.log(`${r.spec.padEnd(6)} ${String(r.clients).padStart(7)} ${r.tok_s.toFixed(1).padStart(7)} ` +
      `${r.ttft_ms.toFixed(1).padStart(9)} ${(r.mean_accept_len?.toFixed(2) ?? '-').padStart(12)} ` +
      `${r.drafts_per_slot.toFixed(2).padStart(13)} ${r.rows_per_step.toFixed(2).padStart(11)} ` +
      `${r.ms_per_step.toFixed(1).padStart(9)} ${(100 * r.busy_share).toFixed(0).padStart(5)}%`);
  }
}
