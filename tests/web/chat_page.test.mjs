// The chat page at GET / driven in headless Chromium (scripts/test-web.sh):
// a streamed reply that grows and ends with its stats line, a reply stopped
// midway after which the page takes the next message, text that looks like
// HTML shown as text, a reply in JSON mode that parses as a JSON object, and
// no errors or CSP violations in the console.
// Writes the screenshot SCREENSHOT (docs/web-chat.png).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import puppeteer from 'puppeteer-core';

import { readMetrics, startServer } from '../server/server_process.mjs';

const bin = process.env.KAKEYA_BIN;
const chromium = process.env.CHROMIUM ?? '/usr/bin/chromium';
const screenshot = process.env.SCREENSHOT;

let server;
let browser;
let page;
let origin;
const consoleErrors = [];

before(async () => {
  server = await startServer(bin, ['--slots', '2']);
  origin = server.url.replace(/\/v1$/, '');
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    // --no-sandbox: Chromium refuses to start its sandbox as root (CI containers).
    args: ['--no-sandbox', '--disable-gpu', '--font-render-hinting=none'],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 860 });
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(e.message));
  // The model decodes thousands of tokens per second on a CPU: slowed to a
  // few hundred bytes per event at ~4 KB/s, a reply arrives over seconds,
  // so that its growth can be seen and Stop pressed midway.
  await page.emulateNetworkConditions({ download: 4000, upload: 100000, latency: 0 });
});

after(async () => {
  await browser?.close();
  await server?.terminate();
});

const lastReply = () => page.evaluate(() => {
  const replies = document.querySelectorAll('.message.assistant');
  const box = replies[replies.length - 1];
  return box ? { text: box.querySelector('.content').textContent, stats: box.querySelector('.stats').textContent,
                 classes: box.className } : null;
});
const buttons = () => page.evaluate(() => ({ send: !document.getElementById('send').disabled,
                                             stop: !document.getElementById('stop').disabled }));

async function setField(id, value) {
  await page.$eval(`#${id}`, (e, v) => { e.value = v; }, String(value));
}

async function sendMessage(text) {
  await page.type('#input', text);
  await page.keyboard.press('Enter');
}

// The lengths the last reply's text took, recorded at every change of the page.
async function recordLengths() {
  await page.evaluate(() => {
    window.replyLengths = [];
    new MutationObserver(() => {
      const replies = document.querySelectorAll('.message.assistant .content');
      const n = replies.length ? replies[replies.length - 1].textContent.length : 0;
      if (window.replyLengths.at(-1) !== n) window.replyLengths.push(n);
    }).observe(document.getElementById('messages'), { childList: true, subtree: true, characterData: true });
  });
}

test('the page loads with its CSP, same-origin assets and the model name', async () => {
  const response = await page.goto(`${origin}/`, { waitUntil: 'load' });
  assert.equal(response.status(), 200);
  assert.match(response.headers()['content-type'], /^text\/html/);
  assert.match(response.headers()['content-security-policy'], /script-src 'self'/);
  await page.waitForFunction(() => document.getElementById('model').textContent === 'kakeya-pystdlib',
                             { timeout: 10000 });
  assert.deepEqual(await buttons(), { send: true, stop: false });
});

test('a reply streams in, grows, and ends with tokens/s, tokens per step and the drafter', async () => {
  await setField('system', 'You are a helpful assistant who answers in Python.');
  await setField('temperature', 0);
  await setField('max_tokens', 120);
  await recordLengths();
  await sendMessage('Write a function that reads a <b>config</b> file <img src=x onerror="window.injected=1">');
  await page.waitForFunction(() => document.getElementById('stop').disabled === false, { timeout: 5000 });
  await page.waitForFunction(() => {
    const s = document.querySelector('.message.assistant .stats');
    return s && /tokens\/s/.test(s.textContent);
  }, { timeout: 60000 });
  const reply = await lastReply();
  assert.ok(reply.text.length > 0, 'the reply has text');
  assert.match(reply.stats, /[\d.]+ tokens\/s · [\d.]+ tokens per step.* · drafter \w+/);
  assert.match(reply.stats, /120 tokens/);
  const lengths = await page.evaluate(() => window.replyLengths);
  const growing = lengths.filter((n) => n > 0);
  assert.ok(growing.length >= 3, `the reply grew in steps (lengths seen: ${lengths})`);
  assert.deepEqual(growing, [...growing].sort((a, b) => a - b), 'the reply only grew');
  assert.deepEqual(await buttons(), { send: true, stop: false });

  // The user's text is shown as text: no element made of it, no handler run.
  const user = await page.evaluate(() => {
    const box = document.querySelector('.message.user .content');
    return { text: box.textContent, elements: box.querySelectorAll('b, img').length, injected: window.injected };
  });
  assert.match(user.text, /a <b>config<\/b> file <img src=x/);
  assert.equal(user.elements, 0);
  assert.equal(user.injected, undefined);
});

test('Stop ends a reply midway; the page then takes the next message', async () => {
  await setField('max_tokens', 400);
  await setField('temperature', 0.8);
  await setField('seed', 3);
  await sendMessage('Now a class that caches the results.');
  await page.waitForFunction(() => {
    const replies = document.querySelectorAll('.message.assistant .content');
    return replies.length === 2 && replies[1].textContent.length > 40;
  }, { timeout: 30000 });
  await page.click('#stop');
  await page.waitForFunction(() => document.getElementById('send').disabled === false, { timeout: 5000 });
  const stopped = await lastReply();
  assert.equal(stopped.stats, 'stopped');
  assert.match(stopped.classes, /stopped/);
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal((await lastReply()).text, stopped.text, 'the stopped reply does not grow');
  assert.deepEqual(await buttons(), { send: true, stop: false });

  // The server saw the client go away and freed the slot.
  let busy;
  for (let i = 0; i < 100; ++i) {
    busy = (await readMetrics(server.url)).get('kakeya_slots_busy');
    if (busy === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(busy, 0, 'no slot is busy after Stop');

  await setField('max_tokens', 60);
  await setField('temperature', 0);
  await sendMessage('Thanks. Shorter, please.');
  await page.waitForFunction(() => {
    const s = [...document.querySelectorAll('.message.assistant .stats')];
    return s.length === 3 && /tokens\/s/.test(s[2].textContent);
  }, { timeout: 60000 });
  assert.deepEqual(await buttons(), { send: true, stop: false });
});

test('"Reply as JSON" gives a reply that is a JSON object', async () => {
  await page.select('#format', 'json_object');
  await setField('max_tokens', 200);
  await setField('temperature', 0);
  await sendMessage('The settings, as JSON.');
  await page.waitForFunction(() => {
    const s = [...document.querySelectorAll('.message.assistant .stats')];
    return s.length === 4 && /tokens\/s/.test(s[3].textContent);
  }, { timeout: 60000 });
  const reply = await lastReply();
  let value;
  assert.doesNotThrow(() => { value = JSON.parse(reply.text); }, `not JSON: ${reply.text}`);
  assert.equal(typeof value, 'object');
  assert.ok(value !== null && !Array.isArray(value), `not an object: ${reply.text}`);
  await page.select('#format', 'text');
});

test('no console errors or CSP violations', async () => {
  if (screenshot) {
    await page.emulateNetworkConditions(null);
    await page.screenshot({ path: screenshot });
  }
  assert.deepEqual(consoleErrors, []);
});
