// The chat page of `kakeya serve` (ADR 0020): plain JavaScript, no build
// step, nothing fetched but this server's own API. Text is only ever put into
// the page through textContent, so a reply holding "<script>" shows as text.
'use strict';

const $ = (id) => document.getElementById(id);

const conversation = [];  // {role, content} as sent to the API
let running = null;       // the AbortController of the reply being streamed

function headers() {
  const h = { 'Content-Type': 'application/json' };
  const key = $('api_key').value.trim();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

function element(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

// Text with ``` fences: the fenced parts in <pre>, the rest as wrapped text.
// An unclosed fence (a reply still streaming) is a code block to the end.
function renderContent(target, text) {
  target.replaceChildren();
  const parts = text.split(/^```[^\n]*\n?/m);
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      const pre = element('pre');
      pre.append(element('code', '', part.replace(/\n$/, '')));
      target.append(pre);
    } else if (part.trim() !== '') {
      target.append(element('div', 'text', part.replace(/^\n+|\n+$/g, '')));
    }
  });
}

function addMessage(role, text) {
  $('empty')?.remove();
  const box = element('article', `message ${role}`);
  box.append(element('div', 'role', role === 'user' ? 'You' : 'Assistant'));
  const content = element('div', 'content');
  renderContent(content, text);
  box.append(content);
  $('messages').append(box);
  box.scrollIntoView({ block: 'end' });
  return box;
}

function numberOrUndefined(id) {
  const v = $(id).value.trim();
  return v === '' ? undefined : Number(v);
}

// The server-sent events of a streamed completion, parsed as they arrive:
// yields the JSON of each `data:` event, returns at `data: [DONE]`.
async function* events(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer = (buffer + value).replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event.split('\n').filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
      if (data === '') continue;  // a keep-alive comment
      if (data === '[DONE]') return;
      yield JSON.parse(data);
    }
  }
}

// "41.8 tokens/s · 2.37 tokens per step (131 of 190 drafts accepted) · drafter auto · 96 tokens · first token 41 ms"
function statsLine(ext, usage) {
  const parts = [];
  const tokens = usage?.completion_tokens;
  const t = ext.timings;
  if (tokens > 1 && t && t.total_ms > t.ttft_ms) {
    // After the first token: prefill and queueing are not decoding speed.
    parts.push(`${((tokens - 1) / ((t.total_ms - t.ttft_ms) / 1000)).toFixed(1)} tokens/s`);
  }
  const s = ext.speculative;
  if (s && s.steps > 0) {
    let accepted = `${s.mean_accept_len.toFixed(2)} tokens per step`;
    if (s.drafted > 0) accepted += ` (${s.accepted} of ${s.drafted} drafts accepted)`;
    parts.push(accepted);
  }
  if (s?.drafter) parts.push(`drafter ${s.drafter}`);
  if (tokens !== undefined) parts.push(`${tokens} tokens`);
  if (t) parts.push(`first token ${Math.round(t.ttft_ms)} ms`);
  return parts.join(' · ');
}

async function errorText(response) {
  try {
    const body = await response.json();
    return body.error?.message ?? JSON.stringify(body);
  } catch {
    return `HTTP ${response.status}`;
  }
}

function setRunning(controller) {
  running = controller;
  $('send').disabled = controller !== null;
  $('stop').disabled = controller === null;
  document.body.classList.toggle('running', controller !== null);
}

async function send(text) {
  conversation.push({ role: 'user', content: text });
  addMessage('user', text);
  const box = addMessage('assistant', '');
  box.classList.add('streaming');
  const content = box.querySelector('.content');
  const stats = element('div', 'stats', 'waiting for the first token…');
  box.append(stats);

  const messages = [];
  const system = $('system').value.trim();
  if (system) messages.push({ role: 'system', content: system });
  messages.push(...conversation);
  const request = {
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: numberOrUndefined('temperature'),
    top_p: numberOrUndefined('top_p'),
    max_tokens: numberOrUndefined('max_tokens'),
    seed: numberOrUndefined('seed'),
    // JSON mode: the reply is a JSON object, whatever the model would rather write.
    response_format: { type: $('format').value },
  };
  const controller = new AbortController();
  setRunning(controller);
  let reply = '';
  let extension = null;
  let usage = null;
  try {
    const response = await fetch('/v1/chat/completions', {
      method: 'POST', headers: headers(), body: JSON.stringify(request), signal: controller.signal,
    });
    if (!response.ok) throw new Error(await errorText(response));
    for await (const chunk of events(response)) {
      if (chunk.error) throw new Error(chunk.error.message);
      const delta = chunk.choices?.[0]?.delta?.content;
      if (delta) {
        reply += delta;
        renderContent(content, reply);
        stats.textContent = 'streaming…';
        box.scrollIntoView({ block: 'end' });
      }
      if (chunk.kakeya) extension = chunk.kakeya;
      if (chunk.usage) usage = chunk.usage;
    }
    stats.textContent = extension ? statsLine(extension, usage) : '';
  } catch (e) {
    if (controller.signal.aborted) {
      stats.textContent = 'stopped';
      box.classList.add('stopped');
    } else {
      stats.textContent = `error: ${e.message}`;
      box.classList.add('error');
    }
  } finally {
    box.classList.remove('streaming');
    // A stopped reply stays in the conversation as far as it got.
    if (reply) conversation.push({ role: 'assistant', content: reply });
    else if (!controller.signal.aborted) conversation.pop();
    setRunning(null);
    $('input').focus();
  }
}

async function showModel() {
  try {
    const response = await fetch('/v1/models', { headers: headers() });
    if (!response.ok) throw new Error(await errorText(response));
    const list = await response.json();
    $('model').textContent = list.data.map((m) => m.id).join(', ');
  } catch (e) {
    $('model').textContent = `(${e.message})`;
  }
}

$('composer').addEventListener('submit', (event) => {
  event.preventDefault();
  const text = $('input').value.trim();
  if (!text || running) return;
  $('input').value = '';
  send(text);
});
$('input').addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $('composer').requestSubmit();
  }
});
$('stop').addEventListener('click', () => running?.abort());
$('clear').addEventListener('click', () => {
  running?.abort();
  conversation.length = 0;
  $('messages').replaceChildren(element('p', 'empty', 'A new conversation. Send a message to start.'));
  $('messages').firstChild.id = 'empty';
});
$('api_key').addEventListener('change', showModel);
showModel();
