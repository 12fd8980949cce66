// `kakeya serve` driven by the official openai client (npm), against the
// shipped model: models list, completions and chat completions, streaming
// equal to non-streaming, stop sequences, usage, an aborted stream, 8
// parallel greedy streams each byte-identical to the same request alone and
// to `kakeya run`, the error bodies, tool-calling requests, and a graceful SIGTERM.
//
// Run by scripts/test-server.sh (CTest: server_openai); KAKEYA_BIN names the
// binary (default build/bin/kakeya).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import OpenAI from 'openai';

import { metric, readMetrics, startServer } from './server_process.mjs';

const run = promisify(execFile);
const KAKEYA = process.env.KAKEYA_BIN ?? new URL('../../build/bin/kakeya', import.meta.url).pathname;
const API_KEY = 'test-key-123';
const MAX_BODY = 64 * 1024;
const MODEL = 'kakeya-pystdlib';
const PROMPTS = [
  'def parse_args(',
  'import os\n',
  'class Config:\n    ',
  'def main():\n    ',
  'for i in range(',
  '# Copyright',
  'with open(',
  'return self.',
];
const N = 48;

// What `kakeya run` generates greedily for a prompt with the same settings.
async function kakeyaRun(prompt, n) {
  const { stdout } = await run(KAKEYA, ['run', '-p', prompt, '-n', String(n), '--temp', '0', '--json', '-t', '1']);
  return JSON.parse(stdout);
}

async function streamText(stream) {
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      text += choice.text ?? choice.delta?.content ?? '';
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return { text, finish, usage, chunks };
}

describe('kakeya serve with the openai client', { timeout: 100_000 }, () => {
  let server;
  let client;
  const reference = new Map();  // prompt -> kakeya run --json

  before(async () => {
    server = await startServer(KAKEYA, ['--api-key', API_KEY, '--max-body', String(MAX_BODY), '--slots', '4']);
    client = new OpenAI({ baseURL: server.url, apiKey: API_KEY, maxRetries: 0 });
    // Two at a time: the machine has two cores and the server is idle now.
    for (let i = 0; i < PROMPTS.length; i += 2) {
      const pair = PROMPTS.slice(i, i + 2);
      const outs = await Promise.all(pair.map((p) => kakeyaRun(p, N)));
      pair.forEach((p, j) => reference.set(p, outs[j]));
    }
  });

  after(async () => {
    if (server) await server.kill();
  });

  test('lists the one model', async () => {
    const models = [];
    for await (const m of client.models.list()) models.push(m.id);
    assert.deepEqual(models, [MODEL]);
  });

  test('a greedy completion equals kakeya run, with usage', async () => {
    const prompt = PROMPTS[0];
    const r = await client.completions.create({ model: MODEL, prompt, max_tokens: N, temperature: 0 });
    const ref = reference.get(prompt);
    assert.equal(r.choices[0].text, ref.text);
    assert.equal(r.choices[0].finish_reason, ref.stop === 'length' ? 'length' : 'stop');
    assert.equal(r.usage.prompt_tokens, ref.prompt_tokens.length);
    assert.equal(r.usage.completion_tokens, ref.tokens.length);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
    assert.equal(r.kakeya.speculative.drafter, 'auto');
    assert.ok(r.kakeya.speculative.steps > 0);
  });

  test('streaming equals non-streaming (completions and chat), with include_usage', async () => {
    const prompt = PROMPTS[1];
    const whole = await client.completions.create({ model: MODEL, prompt, max_tokens: N, temperature: 0 });
    const streamed = await streamText(await client.completions.create({
      model: MODEL, prompt, max_tokens: N, temperature: 0, stream: true, stream_options: { include_usage: true },
    }));
    assert.equal(streamed.text, whole.choices[0].text);
    assert.equal(streamed.finish, whole.choices[0].finish_reason);
    assert.deepEqual(streamed.usage, whole.usage);
    assert.ok(streamed.chunks > 3);

    const messages = [{ role: 'system', content: 'You write Python.' }, { role: 'user', content: 'Parse arguments.' }];
    const chat = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 32, temperature: 0 });
    assert.equal(chat.choices[0].message.role, 'assistant');
    assert.ok(chat.usage.prompt_tokens > 10);
    const chatStream = await streamText(await client.chat.completions.create({
      model: MODEL, messages, max_tokens: 32, temperature: 0, stream: true, stream_options: { include_usage: true },
    }));
    assert.equal(chatStream.text, chat.choices[0].message.content);
    assert.deepEqual(chatStream.usage, chat.usage);
  });

  test('stop sequences end the text before them, across tokens, streamed or not', async () => {
    const prompt = PROMPTS[0];
    const full = reference.get(prompt).text;
    // A stop string of several tokens from the middle of the greedy text.
    const at = Math.floor(full.length / 2);
    const stop = full.slice(at, at + 6);
    const expected = full.slice(0, full.indexOf(stop));
    for (const stream of [false, true]) {
      const params = { model: MODEL, prompt, max_tokens: N, temperature: 0, stop: ['NEVER-THERE', stop] };
      const r = stream ? await streamText(await client.completions.create({ ...params, stream }))
                       : await client.completions.create(params);
      const text = stream ? r.text : r.choices[0].text;
      const finish = stream ? r.finish : r.choices[0].finish_reason;
      assert.equal(text, expected, `stream: ${stream}`);
      assert.equal(finish, 'stop');
    }
  });

  test('an aborted stream is cancelled, its slot freed, and the server keeps serving', async () => {
    const before = await readMetrics(server.url, API_KEY);
    const controller = new AbortController();
    // parse_args( makes the shipped model loop: it would run all 400 tokens.
    const stream = await client.completions.create(
      { model: MODEL, prompt: PROMPTS[0], max_tokens: 400, temperature: 0, stream: true },
      { signal: controller.signal });
    let chunks = 0;
    for await (const _ of stream) {
      if (++chunks === 3) {
        controller.abort();  // the connection closes under the stream
        break;
      }
    }
    let m;
    for (let tries = 0; tries < 400; tries++) {
      m = await readMetrics(server.url, API_KEY);
      if (metric(m, 'kakeya_slots_busy') === 0 &&
          metric(m, 'kakeya_finished_total{reason="cancelled"}') > metric(before, 'kakeya_finished_total{reason="cancelled"}')) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(metric(m, 'kakeya_slots_busy'), 0);
    assert.ok(metric(m, 'kakeya_completion_tokens_total') - metric(before, 'kakeya_completion_tokens_total') < 400,
      'the generation stopped early');
    const r = await client.completions.create({ model: MODEL, prompt: PROMPTS[0], max_tokens: N, temperature: 0 });
    assert.equal(r.choices[0].text, reference.get(PROMPTS[0]).text);
  });

  test('logprobs and top_logprobs, streamed or not', async () => {
    const params = { model: MODEL, prompt: PROMPTS[0], max_tokens: 8, temperature: 0, logprobs: 2 };
    const r = await client.completions.create(params);
    const lp = r.choices[0].logprobs;
    assert.equal(lp.tokens.join(''), r.choices[0].text);
    assert.equal(lp.token_logprobs.length, 8);
    for (const [i, alternatives] of lp.top_logprobs.entries()) {
      assert.equal(Object.keys(alternatives).length <= 2, true);
      // Greedy: the chosen token is the most likely one.
      assert.equal(Math.max(...Object.values(alternatives)), lp.token_logprobs[i]);
      assert.ok(lp.token_logprobs[i] <= 0);
    }
    const messages = [{ role: 'user', content: 'def' }];
    const chat = await client.chat.completions.create(
      { model: MODEL, messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3 });
    const content = chat.choices[0].logprobs.content;
    assert.equal(content.map((t) => t.token).join(''), chat.choices[0].message.content);
    assert.equal(content[0].top_logprobs.length, 3);
    assert.deepEqual(Buffer.from(content[0].bytes).toString(), content[0].token);
    const streamed = [];
    for await (const chunk of await client.chat.completions.create(
      { model: MODEL, messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3, stream: true })) {
      streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    }
    assert.deepEqual(streamed, content);
  });

  test('a full queue answers 503 with Retry-After', async () => {
    const small = await startServer(KAKEYA, ['--slots', '1', '--max-queue', '1']);
    try {
      const body = JSON.stringify({ prompt: PROMPTS[0], max_tokens: 300, temperature: 0 });
      const responses = await Promise.all([0, 1, 2, 3].map(() => fetch(`${small.url}/completions`,
        { method: 'POST', headers: { 'Content-Type': 'application/json' }, body })));
      const full = responses.filter((r) => r.status === 503);
      assert.ok(full.length >= 2, `statuses ${responses.map((r) => r.status)}`);
      assert.equal(full[0].headers.get('retry-after'), '1');
      assert.equal((await full[0].json()).error.code, 'queue_full');
      assert.equal(responses.filter((r) => r.status === 200).length + full.length, 4);
    } finally {
      await small.kill();
    }
  });

  test('8 parallel greedy streams each equal the request alone and kakeya run', async () => {
    const alone = [];
    for (const prompt of PROMPTS) {
      alone.push((await client.completions.create({ model: MODEL, prompt, max_tokens: N, temperature: 0 })).choices[0].text);
    }
    const together = await Promise.all(PROMPTS.map(async (prompt) =>
      streamText(await client.completions.create({ model: MODEL, prompt, max_tokens: N, temperature: 0, stream: true }))));
    PROMPTS.forEach((prompt, i) => {
      assert.equal(together[i].text, alone[i], `prompt ${JSON.stringify(prompt)}: parallel vs alone`);
      assert.equal(alone[i], reference.get(prompt).text, `prompt ${JSON.stringify(prompt)}: server vs kakeya run`);
    });
  });

  test('bad requests get OpenAI error bodies naming the problem', async () => {
    const post = (path, body, headers = {}) => fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}`, ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    const expectError = async (response, status, pattern, param) => {
      assert.equal(response.status, status);
      const { error } = await response.json();
      assert.match(error.message, pattern);
      assert.equal(typeof error.type, 'string');
      if (param !== undefined) assert.equal(error.param, param);
    };
    await expectError(await post('/completions', '{"prompt": '), 400, /malformed JSON/);
    await expectError(await post('/completions', { prompt: 'x', max_tokens: 'ten' }), 400, /max_tokens must be an integer/, 'max_tokens');
    await expectError(await post('/completions', { prompt: 'x', top_p: 7 }), 400, /top_p/, 'top_p');
    await expectError(await post('/completions', { prompt: 'x', n: 2 }), 400, /n = 2/, 'n');
    await expectError(await post('/chat/completions', { messages: [] }), 400, /messages is empty/, 'messages');
    await expectError(await post('/completions', { prompt: 'x', model: 'gpt-9' }), 404, /gpt-9/, 'model');
    await expectError(await post('/completions', { prompt: 'x '.repeat(2000) }), 400, /\d+ tokens but the context holds 512/, 'prompt');
    await expectError(await post('/completions', { prompt: 'x'.repeat(MAX_BODY) }), 413, /max-body/);
    await expectError(await post('/completions', { prompt: 'x' }, { Authorization: 'Bearer wrong' }), 401, /wrong/);
    const unauthorized = await fetch(`${server.url}/models`);
    await expectError(unauthorized, 401, /no API key/);
    assert.equal((await fetch(`${server.url.replace('/v1', '')}/health`)).status, 200);
    // The openai client surfaces them as typed errors.
    await assert.rejects(client.completions.create({ model: MODEL, prompt: 'x', temperature: -1 }),
      (e) => e instanceof OpenAI.BadRequestError && /temperature/.test(e.message));
  });

  // The shipped model has no chat template (ChatML), so it has no tool-call
  // syntax: tools are refused naming the template, while a conversation that
  // holds earlier calls and results still renders. Parsing calls out of a
  // reply is covered by tool_calls_test (the model writes no calls).
  test('tools: checked, refused without a tool-call syntax; calls in the conversation accepted', async () => {
    const user = [{ role: 'user', content: 'weather?' }];
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
    const badRequest = (param, pattern) => (e) =>
      e instanceof OpenAI.BadRequestError && e.param === param && pattern.test(e.message);
    await assert.rejects(client.chat.completions.create({ model: MODEL, messages: user, tools }),
      badRequest('tools', /no tool-call format kakeya supports/));
    await assert.rejects(client.chat.completions.create({ model: MODEL, messages: user, tools, tool_choice: 'none' }),
      badRequest('tools', /no tool-call format/));
    await assert.rejects(client.chat.completions.create(
      { model: MODEL, messages: user, tools: [{ type: 'function', function: { name: 'get weather' } }] }),
    badRequest('tools[0].function.name', /letters, digits/));
    await assert.rejects(client.chat.completions.create({ model: MODEL, messages: user, tool_choice: 'required' }),
      badRequest('tool_choice', /no tools/));
    await assert.rejects(client.chat.completions.create(
      { model: MODEL, messages: user, tools, tool_choice: { type: 'function', function: { name: 'fly' } } }),
    badRequest('tool_choice.function.name', /fly/));
    const reply = await client.chat.completions.create({
      model: MODEL, max_tokens: 4, temperature: 0,
      messages: [...user,
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'cold' }],
    });
    assert.equal(typeof reply.choices[0].message.content, 'string');
    assert.equal(reply.choices[0].message.tool_calls, undefined);
    assert.notEqual(reply.choices[0].finish_reason, 'tool_calls');
  });

  test('SIGTERM lets a running stream finish, then exits 0', async () => {
    const stream = await client.completions.create(
      { model: MODEL, prompt: PROMPTS[0], max_tokens: N, temperature: 0, stream: true });
    const iterator = stream[Symbol.asyncIterator]();
    const first = await iterator.next();
    const exited = server.terminate();
    let text = first.value.choices[0].text;
    for (let r = await iterator.next(); !r.done; r = await iterator.next()) text += r.value.choices[0]?.text ?? '';
    assert.equal(text, reference.get(PROMPTS[0]).text);
    assert.equal(await exited, 0);
    server = null;
  });
});
