// A bounded load test of `kakeya serve` (not part of CI; see README "Serving"):
//   node tests/server/load.mjs [--seconds 60] [--clients 16] [--bin build/bin/kakeya] [-- serve flags...]
// Starts a server on a free port with the shipped model, then runs CLIENTS
// loops for SECONDS, each request one of: a greedy stream, a greedy whole
// response, a stream aborted after a few events, a whole request aborted
// while it waits, a sampled request, a structured one (a JSON schema or JSON
// mode, streamed or not, sometimes aborted), one with tools (which the
// shipped model's template-less ChatML refuses with 400), and a malformed
// one. Checks: the server
// never dies, every greedy output equals the same request made alone before
// the load, every malformed request gets a 4xx, and afterwards the slots are
// free and the resident memory is back near its idle level. Exits 1 on a
// failed check, printing a JSON summary either way.
import { readMetrics, metric, sseChunks, startServer } from './server_process.mjs';

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const SECONDS = Number(flag('--seconds', 60));
const CLIENTS = Number(flag('--clients', 16));
const BIN = flag('--bin', new URL('../../build/bin/kakeya', import.meta.url).pathname);
const SERVE_FLAGS = args.includes('--') ? args.slice(args.indexOf('--') + 1) : [];
const MAX_TOKENS = 32;
const PROMPTS = ['def parse_args(', 'import os\n', 'class Config:\n    ', 'for i in range(', 'with open(', 'return self.'];
// Each must get a 4xx: broken JSON, wrong types, out-of-range values, unknown
// fields' values, an unknown model, an empty prompt list, too long a prompt.
const MALFORMED = [
  '{"prompt": ',
  '[]',
  '{"prompt": "x", "max_tokens": "8"}',
  '{"prompt": "x", "temperature": -1}',
  '{"prompt": "x", "top_p": 2}',
  '{"prompt": "x", "n": 4}',
  '{"prompt": "x", "stop": [1, 2]}',
  '{"prompt": "x", "model": "no-such-model"}',
  '{"prompt": []}',
  '{"prompt": [1, 99999999]}',
  `{"prompt": "${'x '.repeat(5000)}"}`,
  '{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}',
  '{"prompt": "x", "user": ' + '['.repeat(10000) + '}',
  '\u0000\u00ff garbage',
  '{"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "objekt"}}}}',
  '{"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {"format": "uri"}}}}',
  '{"prompt": "x", "grammar": "root ::= ("}',
  '{"prompt": "x", "grammar": "root ::= root \\"a\\""}',
  '{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "a b"}}]}',
];
const SCHEMA = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 12 }, n: { type: 'integer', minimum: 0, maximum: 99 } },
  required: ['name', 'n'],
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pick = (list) => list[Math.floor(Math.random() * list.length)];

function post(url, path, body, signal) {
  return fetch(`${url}${path}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body), signal,
  });
}

// The text of a completions stream, from its server-sent events.
async function readStream(response, stopAfterEvents = Infinity, controller = null) {
  let text = '';
  let events = 0;
  for await (const chunk of sseChunks(response)) {
    if (chunk.error) throw new Error(`stream error: ${chunk.error.message}`);
    text += chunk.choices[0]?.text ?? '';
    if (++events >= stopAfterEvents) {
      controller.abort();
      return text;
    }
  }
  return text;
}

const greedy = (prompt) => ({ prompt, max_tokens: MAX_TOKENS, temperature: 0 });

async function main() {
  const server = await startServer(BIN, SERVE_FLAGS);
  const url = server.url;
  const reference = new Map();
  for (const prompt of PROMPTS) {
    const r = await (await post(url, '/completions', greedy(prompt))).json();
    reference.set(prompt, r.choices[0].text);
  }
  const idleRss = server.rssKiB();

  const counts = {};
  const failures = [];
  const count = (kind) => { counts[kind] = (counts[kind] ?? 0) + 1; };
  const fail = (what) => { if (failures.length < 20) failures.push(what); };

  const kinds = {
    async stream() {
      const prompt = pick(PROMPTS);
      const text = await readStream(await post(url, '/completions', { ...greedy(prompt), stream: true }));
      if (text !== reference.get(prompt)) fail(`stream of ${JSON.stringify(prompt)} differs from alone`);
    },
    async whole() {
      const prompt = pick(PROMPTS);
      const r = await post(url, '/completions', greedy(prompt));
      if (r.status !== 200) return fail(`whole: status ${r.status}`);
      if ((await r.json()).choices[0].text !== reference.get(prompt)) fail(`whole ${JSON.stringify(prompt)} differs`);
    },
    async abortedStream() {
      const controller = new AbortController();
      const r = await post(url, '/completions', { ...greedy(pick(PROMPTS)), max_tokens: 400, stream: true },
        controller.signal);
      await readStream(r, 1 + Math.floor(Math.random() * 5), controller).catch(() => {});
    },
    async abortedWhole() {
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 20 + Math.random() * 200);
      await post(url, '/completions', { ...greedy(pick(PROMPTS)), max_tokens: 400 }, controller.signal)
        .then((r) => r.text()).catch(() => {});
    },
    async sampled() {
      const r = await post(url, '/chat/completions',
        { messages: [{ role: 'user', content: pick(PROMPTS) }], max_tokens: MAX_TOKENS, stream: Math.random() < 0.5 });
      if (r.status !== 200) fail(`sampled: status ${r.status}`);
      await r.text();
    },
    async structured() {
      const controller = new AbortController();
      const aborted = Math.random() < 0.2;
      if (aborted) setTimeout(() => controller.abort(), 10 + Math.random() * 100);
      const schema = Math.random() < 0.5;
      const r = await post(url, '/chat/completions', {
        messages: [{ role: 'user', content: pick(PROMPTS) }], max_tokens: 200, stream: Math.random() < 0.5,
        seed: Math.floor(Math.random() * 1000), dry_multiplier: 0.8, dry_allowed_length: 1,
        response_format: schema ? { type: 'json_schema', json_schema: { name: 's', schema: SCHEMA } } : { type: 'json_object' },
      }, controller.signal).catch((e) => (aborted ? null : Promise.reject(e)));
      if (r === null) return;
      if (r.status !== 200) fail(`structured: status ${r.status}`);
      await r.text().catch((e) => (aborted ? '' : Promise.reject(e)));
    },
    async tools() {
      const r = await post(url, '/chat/completions', {
        messages: [{ role: 'user', content: 'weather?' }], max_tokens: 16,
        tools: [{ type: 'function', function: { name: 'get_weather', parameters: SCHEMA } }],
        tool_choice: pick(['auto', 'required', 'none']),
      });
      if (r.status !== 400) fail(`tools on a template without tool calls: status ${r.status}`);
      await r.text();
    },
    async malformed() {
      const body = pick(MALFORMED);
      const r = await post(url, pick(['/completions', '/chat/completions']), body);
      if (r.status < 400 || r.status >= 500) fail(`malformed ${body.slice(0, 40)}: status ${r.status}`);
      await r.text();
    },
  };
  const names = Object.keys(kinds);
  const deadline = Date.now() + SECONDS * 1000;
  const t0 = Date.now();
  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (Date.now() < deadline) {
      const kind = pick(names);
      try {
        await kinds[kind]();
        count(kind);
      } catch (e) {
        fail(`${kind}: ${e.message}`);
      }
    }
  }));
  const seconds = (Date.now() - t0) / 1000;

  // Cancelled requests free their slots within a step; give it a moment.
  let m;
  for (let i = 0; i < 100; i++) {
    m = await readMetrics(url);
    if (metric(m, 'kakeya_slots_busy') === 0 && metric(m, 'kakeya_queue_length') === 0) break;
    await sleep(100);
  }
  if (metric(m, 'kakeya_slots_busy') !== 0) fail('slots still busy after the load');
  const health = await fetch(url.replace(/\/v1$/, '/health'));
  if (health.status !== 200) fail(`health: ${health.status}`);
  for (const prompt of PROMPTS) {
    const r = await (await post(url, '/completions', greedy(prompt))).json();
    if (r.choices[0].text !== reference.get(prompt)) fail(`after the load, ${JSON.stringify(prompt)} differs`);
  }
  const afterRss = server.rssKiB();
  // Back near idle: within 10% or 32 MiB of it (allocator caches may keep a little).
  if (afterRss > idleRss + Math.max(32 * 1024, idleRss / 10)) fail(`RSS ${afterRss} KiB after, ${idleRss} KiB idle`);
  const exit = await server.terminate();
  if (exit !== 0) fail(`exit status ${exit}`);

  const summary = {
    seconds, clients: CLIENTS, requests: counts,
    requests_per_second: Object.values(counts).reduce((a, b) => a + b, 0) / seconds,
    completion_tokens: metric(m, 'kakeya_completion_tokens_total'),
    cancelled: metric(m, 'kakeya_finished_total{reason="cancelled"}'),
    rss_kib: { idle: idleRss, after: afterRss },
    failures,
  };
  console.log(JSON.stringify(summary, null, 2));
  process.exit(failures.length === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
