// The chat page against the built-in model (data/brown: context 512, no chat template) behind --api-key, in Debian's
// Chromium at a phone's size (390×844) and a laptop's (1280×800): the page reads the server's context (GET /props)
// and asks for no more tokens than fit; the phone's menu opens the sidebar, whose API-key field lets the page send;
// a conversation that outgrows the context says so, and dropping its oldest turns lets it go on; regenerate, edit
// and resend, copy a reply and a code block; everything by keyboard alone; every text's contrast at least 4.5:1 in
// both themes, computed in the page from the computed styles. With ZINC_SCREENSHOTS=DIR it also saves the pictures
// of docs/serve.md (the command is there) and does nothing else.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { launchChromium } from './js/browser.mjs';
import { startServer } from './js/serve.mjs';

const KEY = 'sesame';
const BROWN = fileURLToPath(new URL('../../data/brown/brown-qwen3-5m-bf16.gguf', import.meta.url));
const PHONE = { width: 390, height: 844 };
const LAPTOP = { width: 1280, height: 800 };
const SHOTS = process.env.ZINC_SCREENSHOTS;

let server, browser;

before(async () => {
  assert.ok(existsSync(BROWN), `the built-in model is missing: ${BROWN}`);
  server = await startServer(['--api-key', KEY], { model: BROWN });
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  const { code } = await server.stop();
  assert.equal(code, 0, server.log());
});

// A page in a context of its own (its own localStorage), with `storage` put there before the page's script runs, and
// the page's chat requests and errors recorded.
async function open(viewport, { storage = {}, colorScheme = 'light', key = KEY } = {}) {
  const context = await browser.newContext({ viewport, colorScheme, deviceScaleFactor: 1 });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
  const init = Object.assign({ settings: key ? { api_key: key } : {} }, storage);
  await context.addInitScript(items => {
    try {
      if (location.protocol !== 'http:' || sessionStorage.getItem('zinc.test.seeded')) return;  // once: a reload
      sessionStorage.setItem('zinc.test.seeded', '1');                                         // keeps the page's
      for (const [k, v] of Object.entries(items)) localStorage.setItem('zinc.' + k, JSON.stringify(v));
    } catch { /* about:blank has no storage */ }
  }, init);
  const page = await context.newPage();
  const chats = [], errors = [];
  page.on('request', r => { if (r.url().endsWith('/v1/chat/completions')) chats.push(r.postDataJSON()); });
  page.on('pageerror', e => errors.push(e.message));
  await page.goto(server.url + '/');
  return { page, context, chats, errors };
}

// The number of tokens the server's template and tokenizer make of `messages`, as the page counts them.
async function promptTokens(messages) {
  const call = async (path, body) => (await fetch(server.url + path, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + KEY },
    body: JSON.stringify(body) })).json();
  const { prompt } = await call('/apply-template', { messages });
  return (await call('/tokenize', { content: prompt, add_special: true, parse_special: true })).tokens.length;
}

const replies = page => page.locator('.message.assistant:not(.error) .stats');
async function waitForReplies(page, n) {
  await page.waitForFunction(n => document.querySelectorAll('.message.assistant .stats').length === n &&
                                  document.getElementById('stop').hidden, n, { timeout: 60000 });
}

// A long text of plain words: about `tokens` tokens of the built-in model.
function words(tokens, seed = 0) {
  const w = ['the', 'jury', 'said', 'that', 'city', 'election', 'was', 'conducted', 'fairly', 'and', 'well'];
  return Array.from({ length: tokens }, (_, i) => w[(i * 7 + seed) % w.length]).join(' ');
}

function conversation(turns) {
  const messages = [];
  for (const [u, a] of turns) messages.push({ role: 'user', content: u }, { role: 'assistant', content: a,
                                                                              stats: { tokens: 5, finish: 'stop' } });
  return { conversations: [{ id: 'c1', title: turns[0][0].slice(0, 40), messages }], current: 'c1' };
}

const CODE_REPLY = 'Here is a function:\n\n```python\ndef greet(name):\n    # say hello\n    return "hi " + name * 2\n' +
                   '```\n\nAnd some `inline code`, a [link](https://example.com), **bold** text.\n\n> a quote\n\n' +
                   '| a | b |\n|---|---|\n| 1 | 2 |\n\n```c\nint main(void) { return Foo(42); }\n```';

test('at 390×844 the menu opens the sidebar, and the API key entered there lets the page send', { skip: !!SHOTS },
     async () => {
  const { page, context, chats, errors } = await open(PHONE, { key: '' });
  // Without a key the page says what to do; the sidebar is out of sight until the menu opens it.
  await page.waitForSelector('#notice:not([hidden])');
  assert.match(await page.textContent('#notice-text'), /needs an API key.*none is set.*Settings → API key/);
  assert.equal(await page.isVisible('#sidebar'), false);
  assert.equal(await page.isVisible('#menu'), true);
  assert.equal(await page.getAttribute('#menu', 'aria-label'), 'Open the menu: conversations and settings');
  await page.click('#menu');
  await page.waitForSelector('#sidebar', { state: 'visible' });
  assert.equal(await page.getAttribute('#menu', 'aria-expanded'), 'true');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'close-menu');
  assert.ok(await page.isVisible('#new-chat'));
  assert.ok(await page.isVisible('#settings summary'));
  await page.click('#close-menu');
  await page.waitForSelector('#sidebar', { state: 'hidden' });

  // The notice's button opens the menu at the key's field; a wrong key is told apart from none.
  await page.click('#notice-actions button');
  await page.waitForSelector('#set-api_key', { state: 'visible' });
  assert.equal(await page.evaluate(() => document.activeElement.id), 'set-api_key');
  await page.fill('#set-api_key', 'wrong');
  await page.press('#set-api_key', 'Enter');
  await page.waitForFunction(() => /is not right/.test(document.getElementById('notice-text').textContent));
  await page.fill('#set-api_key', KEY);
  await page.press('#set-api_key', 'Enter');
  await page.waitForSelector('#notice', { state: 'hidden' });
  assert.match(await page.textContent('#model-context'), /context 512 tokens/);
  await page.keyboard.press('Escape');
  await page.waitForSelector('#sidebar', { state: 'hidden' });
  assert.equal(await page.evaluate(() => document.activeElement.id), 'menu');

  // Now it sends, and the reply fits in what is left of the context.
  await page.fill('#input', 'The jury said');
  await page.click('#send');
  await waitForReplies(page, 1);
  assert.equal(chats.length, 1);
  assert.ok(chats[0].max_tokens >= 1 && chats[0].max_tokens <= 512 - (await promptTokens(chats[0].messages)));
  assert.equal(await page.locator('.message.error').count(), 0);
  assert.deepEqual(errors, []);
  await context.close();
});

test('at 1280×800 a message gets an answer at context 512: max_tokens is fitted to the context', { skip: !!SHOTS },
     async () => {
  const { page, context, chats, errors } = await open(LAPTOP, { storage: { settings: { api_key: KEY, temperature: 0 } } });
  await page.waitForFunction(() => document.getElementById('model-name').textContent.length > 0);
  assert.equal(await page.isVisible('#sidebar'), true);
  assert.equal(await page.isVisible('#menu'), false);
  assert.equal(await page.getAttribute('#set-max_tokens', 'placeholder'), 'as many as fit, up to 128');
  // Without a setting, a quarter of the context, so that the conversation has room for more turns.
  await page.fill('#input', 'The jury said');
  await page.press('#input', 'Enter');
  await waitForReplies(page, 1);
  assert.equal(chats[0].max_tokens, Math.min(128, 512 - (await promptTokens(chats[0].messages))));
  assert.match(await page.textContent('.message.assistant .stats'), /tokens · .*first token/);
  assert.match(await page.textContent('#context-use'), /takes about \d+ of the 512 tokens of the context/);

  // 1,024 tokens asked for, as the page used to ask: the request asks for what is left of the context.
  await page.click('#settings summary');
  await page.fill('#set-max_tokens', '1024');
  await page.fill('#input', 'And the city');
  await page.press('#input', 'Enter');
  await waitForReplies(page, 2);
  assert.equal(chats[1].max_tokens, 512 - (await promptTokens(chats[1].messages)));
  assert.equal(await page.locator('.message.error').count(), 0);

  // A setting the server refuses: its message, what to do, and a button to the field.
  await page.fill('#set-temperature', '5');
  await page.click('#new-chat');
  await page.fill('#input', 'The jury said');
  await page.press('#input', 'Enter');
  await page.waitForSelector('.message.error');
  assert.match(await page.textContent('.message.error .content'),
               /^The server refused the Temperature setting\. The server said: ".*temperature.*"\. Change it in Settings, or clear it to take the server's default, then try again\.$/);
  await page.getByRole('button', { name: 'Open the setting' }).click();
  assert.equal(await page.evaluate(() => document.activeElement.id), 'set-temperature');
  await page.fill('#set-temperature', '');
  await page.getByRole('button', { name: 'Try again: ask for this reply again' }).click();
  await waitForReplies(page, 1);
  assert.equal(await page.locator('.message.error').count(), 0);
  assert.deepEqual(errors, []);
  await context.close();
});

test('a conversation that outgrows the context says so, and dropping the oldest turns lets it go on',
     { skip: !!SHOTS }, async () => {
  const turns = [[words(120, 1), words(120, 2)], [words(100, 3), words(100, 4)], [words(40, 5), words(40, 6)]];
  const { page, context, chats, errors } = await open(LAPTOP, { storage: conversation(turns) });
  await page.waitForFunction(() => document.getElementById('model-name').textContent.length > 0);
  await page.fill('#input', 'What did the jury say about the election?');
  await page.press('#input', 'Enter');
  await page.waitForSelector('#notice:not([hidden])');
  assert.match(await page.textContent('#notice-text'),
               /no longer fits in the model's context: it takes \d+ tokens and the context holds 512 tokens/);
  assert.equal(chats.length, 0, 'nothing was asked that could not fit');
  // The notice's first button has the focus: Enter drops the turns.
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Drop the oldest turns and continue');
  await page.keyboard.press('Enter');
  await waitForReplies(page, 4);
  assert.equal(chats.length, 1);
  const sent = chats[0].messages;
  assert.ok(sent.length < 7 && sent.length % 2 === 1, JSON.stringify(sent.map(m => m.role)));
  assert.equal(sent[sent.length - 1].content, 'What did the jury say about the election?');
  // Turns are dropped until a whole reply fits: the default, a quarter of the context.
  assert.equal(chats[0].max_tokens, 128);
  assert.ok(128 <= 512 - (await promptTokens(sent)));
  assert.equal(await page.locator('.dropped-note').count(), 1);
  assert.equal(await page.locator('.message.user').count(), 4, 'the dropped turns stay on screen');
  assert.equal(await page.locator('.message.error').count(), 0);

  // A message that alone outgrows the context, in a new conversation: it says so, and offers to edit it.
  await page.click('#new-chat');
  await page.fill('#input', words(600, 7));
  await page.press('#input', 'Enter');
  await page.waitForFunction(() => /This message is too long/.test(document.getElementById('notice-text').textContent) &&
                                   !document.getElementById('notice').hidden);
  await page.click('#notice-actions button');
  assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')),
               'Edit your message (Enter sends, Escape cancels)');
  await page.keyboard.press('Escape');
  assert.equal(await page.locator('.edit').count(), 0);
  assert.deepEqual(errors, []);
  await context.close();
});

test('regenerate a reply, edit and resend a message, copy a reply and a code block', { skip: !!SHOTS }, async () => {
  const { page, context, chats, errors } = await open(LAPTOP, {
    storage: conversation([['Show me some code', CODE_REPLY]]) });
  await page.waitForFunction(() => document.getElementById('model-name').textContent.length > 0);
  const clipboard = () => page.evaluate(() => navigator.clipboard.readText());

  // Copy a code block, then the whole reply (its markdown).
  await page.locator('pre').first().getByRole('button', { name: 'Copy this code (python)' }).click();
  assert.equal(await clipboard(), 'def greet(name):\n    # say hello\n    return "hi " + name * 2');
  await page.getByRole('button', { name: 'Copy this reply' }).click();
  assert.equal(await clipboard(), CODE_REPLY);

  // Regenerate: the last reply asked for again, in its place.
  await page.getByRole('button', { name: 'Regenerate this reply' }).click();
  await waitForReplies(page, 1);
  assert.equal(chats.length, 1);
  assert.deepEqual(chats[0].messages, [{ role: 'user', content: 'Show me some code' }]);
  assert.equal(await page.locator('.message').count(), 2);
  assert.equal(await page.locator('pre').count(), 0, 'the new reply replaced the old');

  // Another turn, then edit the first message: the conversation goes on from the edited message.
  await page.fill('#input', 'Another question');
  await page.press('#input', 'Enter');
  await waitForReplies(page, 2);
  await page.locator('.message.user').first().getByRole('button', { name: 'Edit and resend this message' }).click();
  const editor = page.locator('.edit textarea');
  assert.equal(await editor.inputValue(), 'Show me some code');
  await editor.fill('The jury said');
  await editor.press('Enter');
  await waitForReplies(page, 1);
  assert.equal(chats.length, 3);
  assert.deepEqual(chats[2].messages, [{ role: 'user', content: 'The jury said' }]);
  assert.deepEqual(await page.locator('.message .content').evaluateAll(els => els.length), 2);
  assert.equal(await page.textContent('.message.user .content'), 'The jury said');
  assert.deepEqual(errors, []);
  await context.close();
});

// Presses Tab (Shift+Tab with `back`) until `selector` has the focus; how many presses it took.
async function tabTo(page, selector, { back = false, most = 60 } = {}) {
  for (let i = 1; i <= most; i++) {
    await page.keyboard.press(back ? 'Shift+Tab' : 'Tab');
    if (await page.evaluate(s => document.activeElement?.matches(s), selector)) return i;
  }
  throw new Error('Tab never reached ' + selector);
}

test('keyboard only: send, copy, regenerate, edit, the settings and the phone\'s menu', { skip: !!SHOTS }, async () => {
  const { page, context, chats, errors } = await open(LAPTOP);
  await page.waitForFunction(() => document.getElementById('model-name').textContent.length > 0);
  await tabTo(page, '#input');
  await page.keyboard.type('The jury said');
  await page.keyboard.press('Enter');
  await waitForReplies(page, 1);
  await tabTo(page, '[aria-label="Copy this reply"]');
  await page.keyboard.press('Enter');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()),
               await page.evaluate(() => JSON.parse(localStorage.getItem('zinc.conversations'))[0].messages[1].content));
  await tabTo(page, '[aria-label="Regenerate this reply"]');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.getElementById('stop').hidden && document.querySelector('.stats'));
  await waitForReplies(page, 1);
  assert.equal(chats.length, 2);
  await tabTo(page, '[aria-label="Edit and resend this message"]', { back: true });
  await page.keyboard.press('Enter');
  assert.equal(await page.evaluate(() => document.activeElement.tagName), 'TEXTAREA');
  await page.keyboard.press('Escape');  // cancelled: the focus is back on its button
  assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')),
               'Edit and resend this message');
  await page.keyboard.press('Enter');
  await page.keyboard.type(' again');
  await page.keyboard.press('Enter');
  await waitForReplies(page, 1);
  assert.equal(chats[2].messages[0].content, 'The jury said again');
  // The settings open with Enter on their summary, and their fields follow.
  await tabTo(page, '#settings summary', { back: true });
  await page.keyboard.press('Enter');
  await tabTo(page, '#set-temperature');
  await page.keyboard.type('0');
  assert.equal(await page.evaluate(() => JSON.parse(localStorage.getItem('zinc.settings')).temperature), '0');
  await context.close();

  // The phone: the menu button first, Enter opens the menu, Tab stays in it, Escape closes it.
  const phone = await open(PHONE);
  const p = phone.page;
  await p.waitForFunction(() => document.getElementById('model-name').textContent.length > 0);
  await tabTo(p, '#menu');
  await p.keyboard.press('Enter');
  await p.waitForSelector('#sidebar', { state: 'visible' });
  for (let i = 0; i < 25; i++) {
    await p.keyboard.press('Tab');
    assert.ok(await p.evaluate(() => document.getElementById('sidebar').contains(document.activeElement)),
              'the focus stays in the open menu');
  }
  await p.keyboard.press('Escape');
  await p.waitForSelector('#sidebar', { state: 'hidden' });
  assert.equal(await p.evaluate(() => document.activeElement.id), 'menu');
  await tabTo(p, '#input');
  await p.keyboard.type('The jury said');
  await p.keyboard.press('Enter');
  await waitForReplies(p, 1);
  assert.deepEqual([...errors, ...phone.errors], []);
  await phone.context.close();
});

// The visible controls that have no name a screen reader would read: neither a <label>, an aria-label, nor text.
function unlabelled() {
  return [...document.querySelectorAll('button, input, textarea, select, summary, a[href]')]
    .filter(el => el.checkVisibility({ checkVisibilityCSS: true }) && !(el.type === 'hidden'))
    .filter(el => !(el.getAttribute('aria-label') || (el.labels && el.labels.length) ||
                    (!/^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName) && el.textContent.trim())))
    .map(el => el.outerHTML.slice(0, 80));
}

// Every visible text of the page against what is behind it, by WCAG 2's formula: the lowest ratios found.
function contrasts() {
  const parse = c => {
    const m = c.match(/rgba?\(([^)]+)\)/);
    if (!m) return null;
    const [r, g, b, a = 1] = m[1].split(/[\s,/]+/).filter(Boolean).map(Number);
    return [r, g, b, a];
  };
  const over = (top, under) => top.slice(0, 3).map((v, i) => v * top[3] + under[i] * (1 - top[3])).concat(1);
  const background = el => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) layers.push(c);
      if (c && c[3] === 1) break;
    }
    let bg = [255, 255, 255, 1];
    for (const l of layers.reverse()) bg = over(l, bg);
    return bg;
  };
  const lum = ([r, g, b]) => {
    const f = v => (v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const ratio = (fg, bg) => {
    const a = lum(over(fg, bg)), b = lum(bg);
    return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  };
  const found = [];
  const behindMenu = document.getElementById('main').inert;
  for (const el of document.querySelectorAll('body *')) {
    if (!el.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true })) continue;
    if (behindMenu && document.getElementById('main').contains(el)) continue;  // under the backdrop, inert
    const r = el.getBoundingClientRect();
    if (r.bottom < 0 || r.width === 0 || r.height === 0) continue;  // the skip link, off screen until focused
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    const field = /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName) && el.type !== 'checkbox';
    if (!own && !field) continue;
    const style = field && !el.value && el.placeholder ? getComputedStyle(el, '::placeholder') : getComputedStyle(el);
    const fg = parse(style.color);
    const bg = background(el);
    const what = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
                 (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : '') +
                 ' "' + ((field ? el.value || el.placeholder : el.textContent) || '').trim().slice(0, 30) + '"';
    found.push({ what, ratio: Math.round(ratio(fg, bg) * 100) / 100, color: style.color,
                 background: 'rgb(' + bg.slice(0, 3).map(Math.round).join(', ') + ')' });
  }
  return found;
}

test('every text has a contrast of at least 4.5:1 and every control a label, in both themes, at both sizes',
     { skip: !!SHOTS },
     async () => {
  const storage = conversation([['Show me some code', CODE_REPLY]]);
  const msgs = storage.conversations[0].messages;
  msgs[1].reasoning = 'The user wants code.';
  msgs.push({ role: 'user', content: 'And now?' },
            { role: 'assistant', error: true, action: 'api_key', content: 'This server needs an API key.' });
  msgs.unshift({ role: 'user', content: 'An old turn', excluded: true },
               { role: 'assistant', content: 'An old reply', excluded: true, stats: { tokens: 3, finish: 'stop' } });
  let checked = 0;
  for (const viewport of [LAPTOP, PHONE]) {
    for (const theme of ['light', 'dark']) {
      // The system's theme, and the same theme chosen in the settings against the other system theme.
      for (const [colorScheme, chosen] of [[theme, ''], [theme === 'light' ? 'dark' : 'light', theme]]) {
        const { page, context } = await open(viewport, {
          colorScheme, storage: { ...storage, settings: { api_key: KEY, theme: chosen, system: 'Be brief.' } } });
        await page.waitForFunction(() => document.getElementById('model-name').textContent.length > 0);
        await page.evaluate(() => {
          document.querySelector('details.thinking').open = true;
          showNotice('This conversation no longer fits.', [{ label: 'Drop', run() {} }, { label: 'New', run() {} }]);
          setStatus('Copied.');
        });
        const views = [['page', () => {}]];
        views.push(['settings', () => page.evaluate(() => {
          if (narrow()) openMenu();
          document.getElementById('settings').open = true;
        })]);
        for (const [view, show] of views) {
          await show();
          const found = await page.evaluate(contrasts);
          const label = viewport.width + '×' + viewport.height + ' ' + theme + (chosen ? ' (chosen)' : '') + ' ' + view;
          assert.ok(found.length > 20, label + ': ' + found.length + ' texts');
          if (view === 'settings')
            assert.ok(found.some(f => f.what.includes('set-temperature')), label + ': the settings are checked');
          assert.deepEqual(await page.evaluate(unlabelled), [], label + ': every control has a name');
          const low = found.filter(f => f.ratio < 4.5);
          assert.deepEqual(low, [], label);
          checked += found.length;
        }
        await context.close();
      }
    }
  }
  assert.ok(checked > 500);
});

test('pictures of the page for docs/serve.md', { skip: !SHOTS }, async () => {
  const shots = [
    ['chat-page.png', LAPTOP, 'light', false],
    ['chat-page-dark.png', LAPTOP, 'dark', false],
    ['chat-page-phone.png', PHONE, 'light', false],
    ['chat-page-phone-menu.png', PHONE, 'dark', true],
  ];
  const code = 'A reply with code:\n\n```python\ndef jury(said):\n    # the verdict\n    return said.upper()\n```';
  for (const [name, viewport, colorScheme, menu] of shots) {
    const { page, context } = await open(viewport, { colorScheme, storage: {
      ...conversation([['Show me some code', code]]),
      settings: { api_key: KEY, seed: 7, max_tokens: 60 } } });
    await page.waitForFunction(() => document.getElementById('model-name').textContent.length > 0);
    await page.fill('#input', 'The jury said');
    await page.press('#input', 'Enter');
    await waitForReplies(page, 2);
    await page.evaluate(() => document.activeElement.blur());
    if (menu) {
      await page.click('#menu');
      await page.evaluate(() => { document.getElementById('settings').open = true; });
      await page.waitForTimeout(300);  // the drawer's slide
    }
    await page.screenshot({ path: SHOTS + '/' + name });
    await context.close();
  }
});
