// The chat page in Debian's Chromium, driven by playwright-core: it loads from the server alone, a message gets a
// streamed reply with its speed, the stop button stops a long reply (and the server serves the next one), and the
// conversation is still there after a reload. The page's newer parts (the context, the phone's menu, the API key,
// regenerate, edit, copy, the keyboard, contrast) and the pictures of docs/serve.md are page.test.mjs's.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launchChromium } from './js/browser.mjs';
import { startServer, settledMetric } from './js/serve.mjs';

let server, browser;

before(async () => {
  server = await startServer([], { model: process.env.ZINC_PAGE_MODEL || undefined });
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  const { code } = await server.stop();
  assert.equal(code, 0, server.log());
});

test('the chat page streams a reply, stops one, and keeps the conversation', async () => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 720 } });
  const elsewhere = [];
  page.on('request', r => { if (!r.url().startsWith(server.url)) elsewhere.push(r.url()); });
  const errors = [];
  page.on('pageerror', e => errors.push(e.message));
  await page.goto(server.url + '/');
  await page.waitForFunction(() => document.getElementById('model-name').textContent.length > 0);

  // A short reply, streamed: the text grows in the page, then the speed line appears.
  await page.click('#settings summary');
  await page.fill('#set-max_tokens', '48');
  await page.fill('#set-temperature', '0');
  await page.fill('#input', 'Tell me about the weather');
  await page.click('#send');
  await page.waitForSelector('.message.assistant .stats', { timeout: 60000 });
  const reply = await page.textContent('.message.assistant .content');
  assert.ok(reply.trim().length > 0, 'the reply has text');
  const stats = await page.textContent('.message.assistant .stats');
  assert.match(stats, /tokens · [\d.]+ tok\/s · first token \d+ ms/);
  assert.equal(await page.isVisible('#send'), true);

  // A long reply, stopped with the button once some of it has arrived. The button is pressed from inside the page, in
  // the same look at it that sees the text arrive: a click from the test takes several round trips to a busy browser,
  // in which the test model's whole reply (4096 tokens at most, a few thousand a second) can end.
  await page.fill('#set-max_tokens', '4096');
  await page.fill('#input', 'Now write a very long story');
  await page.click('#send');
  await page.waitForFunction(() => {
    const all = document.querySelectorAll('.message.assistant .content');
    const stop = document.getElementById('stop');
    if (all.length !== 2 || all[1].textContent.length <= 20 || stop.hidden) return false;
    stop.click();
    return true;
  }, null, { timeout: 60000 });
  await page.waitForFunction(() => document.querySelectorAll('.message.assistant .stats').length === 2);
  assert.match(await page.textContent('.message.assistant:nth-of-type(4) .stats'), /stopped/);
  const stoppedAt = (await page.textContent('.message.assistant:nth-of-type(4) .content')).length;
  await page.waitForTimeout(500);
  assert.equal((await page.textContent('.message.assistant:nth-of-type(4) .content')).length, stoppedAt);

  // The server let go of it: the next message is answered.
  await page.fill('#set-max_tokens', '8');
  await page.fill('#input', 'And a short one');
  await page.click('#send');
  await page.waitForFunction(() => document.querySelectorAll('.message.assistant .stats').length === 3,
                             null, { timeout: 60000 });
  assert.equal(await settledMetric(server.url, 'zinc_requests_in_flight', 0), 0);

  // Kept in the browser: after a reload the conversation is there.
  await page.reload();
  await page.waitForSelector('.message.assistant');
  assert.equal(await page.locator('.message.user').count(), 3);
  assert.equal(await page.locator('#conversations li').count(), 1);
  assert.equal(await page.textContent('.message.assistant .content'), reply);

  assert.deepEqual(elsewhere, [], 'the page loads nothing from elsewhere');
  assert.deepEqual(errors, []);
  await page.close();
});

test('markdown and code in a reply are rendered, and nothing in it becomes markup', async () => {
  const page = await browser.newPage();
  await page.goto(server.url + '/');
  const html = await page.evaluate(() => renderMarkdown(
    '# Title\n\nSome **bold** and `code`.\n\n```python\ndef f(x):\n    return "hi"  # greet\n```\n\n' +
    '- one\n- two\n\n<img src=x onerror=alert(1)> [a](javascript:alert(1))'));
  assert.match(html, /<h1>Title<\/h1>/);
  assert.match(html, /<strong>bold<\/strong>/);
  assert.match(html, /<code>code<\/code>/);
  assert.match(html, /<span class="hl-kw">def<\/span> <span class="hl-fn">f<\/span>/);
  assert.match(html, /<span class="hl-str">&quot;hi&quot;<\/span>/);
  assert.match(html, /<span class="hl-com"># greet<\/span>/);
  assert.match(html, /<ul><li>one<\/li><li>two<\/li><\/ul>/);
  assert.ok(!html.includes('<img') && html.includes('&lt;img'));
  assert.ok(!html.includes('javascript:'));

  // A reply with reasoning and a tool call: the reasoning collapsed once the answer has begun, the call's arguments
  // shown as formatted JSON.
  const drawn = await page.evaluate(() => {
    const el = drawMessage({ role: 'assistant', reasoning: 'Paris is in France.', content: 'Let me look.',
                             tool_calls: [{ id: 'c', type: 'function',
                                            function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
                             stats: { tokens: 20, tps: 31.5, ttft: 120, finish: 'tool_calls' } });
    const text = selector => el.querySelector(selector).textContent;
    return { open: el.querySelector('details.thinking').open, thinking: text('.thinking .text'),
             call: text('.tool-call .name'), args: text('.tool-call pre'), stats: text('.stats') };
  });
  assert.deepEqual(drawn, { open: false, thinking: 'Paris is in France.', call: 'Tool call: get_weather',
                            args: '{\n  "city": "Paris"\n}',
                            stats: '20 tokens · 31.5 tok/s · first token 120 ms · tool calls' });
  await page.close();
});
