#!/usr/bin/env node
// Throughput of `kakeya serve` by concurrency, speculation on and off (a
// benchmark, not a test):
//   scripts/serve-bench.mjs [--clients 1,2,4,8] [--specs none,auto] [--rounds 3] [--requests 4]
//                           [--tokens 128] [--bin build/bin/kakeya] [-- serve flags, e.g. -m model.gguf -t 2]
// It starts one server per --spec, each with as many slots as the most
// clients, all at once, and then, for each round and client count, runs
// every spec in turn (the order rotating by round): that many streaming
// clients, each sending --requests greedy completions of --tokens tokens
// (prompts of Python from a fixed list, so runs compare), one after another.
// The specs of one client count thus run side by side, seconds apart: this
// machine's memory bandwidth flips within minutes, and a ratio of runs taken
// minutes apart measures the flip. Prints per (spec, clients) the medians
// over the rounds of: aggregate generated tok/s over the wall time, its ratio
// to the first spec's in the same round, mean time to first token, mean
// accepted length and drafts per step (of each request), the draft policy's
// latest choice at that concurrency (/metrics kakeya_drafts_per_slot), and
// from /metrics the forwards' rows and milliseconds and the share of the wall
// time spent in them; --json prints every round's rows.
import { performance } from 'node:perf_hooks';

import { metric, readMetrics, sseChunks, startServer } from '../tests/server/server_process.mjs';

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const CLIENTS = flag('--clients', '1,2,4,8').split(',').map(Number);
const SPECS = flag('--specs', 'none,auto').split(',');
const ROUNDS = Number(flag('--rounds', 3));
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

// One client count on one server: its row of figures.
async function measure(server, spec, clients) {
  const before = await readMetrics(server.url);
  const t0 = performance.now();
  const results = (await Promise.all(Array.from({ length: clients }, async (_, c) => {
    const out = [];
    for (let r = 0; r < REQUESTS; r++) out.push(await streamOnce(server.url, PROMPTS[(c + r * clients) % PROMPTS.length]));
    return out;
  }))).flat();
  const seconds = (performance.now() - t0) / 1000;
  const total = (of) => results.reduce((a, r) => a + of(r), 0);
  const tokens = total((r) => r.tokens);
  const steps = total((r) => r.spec?.steps ?? 0);
  const accepted = total((r) => r.spec?.accepted ?? 0);
  const drafted = total((r) => r.spec?.drafted ?? 0);
  const m = await readMetrics(server.url);
  const delta = (name) => metric(m, name) - metric(before, name);
  const nSteps = delta('kakeya_steps_total');
  const busySeconds = delta('kakeya_busy_seconds_total');
  const stepRows = delta('kakeya_step_rows_total');
  return {
    spec, clients, tok_s: tokens / seconds,
    ttft_ms: total((r) => r.ttft) / results.length,
    mean_accept_len: steps > 0 ? (steps + accepted) / steps : null,
    drafted_per_step: steps > 0 ? drafted / steps : null,
    drafts_per_slot: metric(m, `kakeya_drafts_per_slot{decoding_slots="${clients}"}`),
    // The scheduler's side: rows per forward, ms per forward, and the share
    // of the wall time spent in forwards (the rest: HTTP, queueing, idle).
    rows_per_step: nSteps > 0 ? stepRows / nSteps : 0,
    ms_per_step: nSteps > 0 ? 1000 * busySeconds / nSteps : 0,
    busy_share: busySeconds / seconds,
  };
}

const servers = [];
for (const spec of SPECS) {
  const server = await startServer(BIN, ['--spec', spec, '--slots', String(Math.max(...CLIENTS)), ...SERVE_FLAGS]);
  await streamOnce(server.url, PROMPTS[0]);  // warm-up
  servers.push(server);
}
const rows = [];
for (let round = 0; round < ROUNDS; round++) {
  for (const clients of CLIENTS) {
    const bySpec = [];  // this round's row of each server, measured in rotating order
    for (let k = 0; k < SPECS.length; k++) {
      const i = (k + round) % SPECS.length;
      bySpec[i] = await measure(servers[i], SPECS[i], clients);
    }
    bySpec.forEach((r, server) => rows.push({ round, server, ...r, ratio: r.tok_s / bySpec[0].tok_s }));
  }
}
for (const server of servers) await server.terminate();

if (args.includes('--json')) {
  console.log(JSON.stringify(rows, null, 2));
} else {
  const median = (xs) => {
    const v = xs.filter((x) => x !== null).sort((a, b) => a - b);
    if (v.length === 0) return null;
    return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  };
  const fixed = (x, digits, width) => (x === null ? '-' : x.toFixed(digits)).padStart(width);
  console.log(`medians of ${ROUNDS} rounds; ratio: tok/s against ${SPECS[0]} in the same round (each round's ratios)`);
  console.log('spec   clients   tok/s   ratio   ttft ms   accept len   drafted   drafts/slot   rows/step   ms/step   busy   ratios');
  SPECS.forEach((spec, server) => {  // a spec may be named twice: the noise of a ratio
    for (const clients of CLIENTS) {
      const rs = rows.filter((r) => r.server === server && r.clients === clients);
      const mid = (key) => median(rs.map((r) => r[key]));
      console.log(`${spec.padEnd(6)} ${String(clients).padStart(7)} ${fixed(mid('tok_s'), 1, 7)} ${fixed(mid('ratio'), 2, 7)} ` +
        `${fixed(mid('ttft_ms'), 1, 9)} ${fixed(mid('mean_accept_len'), 2, 12)} ${fixed(mid('drafted_per_step'), 2, 9)} ${fixed(mid('drafts_per_slot'), 2, 13)} ` +
        `${fixed(mid('rows_per_step'), 2, 11)} ${fixed(mid('ms_per_step'), 1, 9)} ${(100 * mid('busy_share')).toFixed(0).padStart(5)}%   ` +
        rs.map((r) => r.ratio.toFixed(2)).join(' '));
    }
  });
}
