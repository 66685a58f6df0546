// zinc serve through the official `openai` npm client, as an application would use it: chat and completions, streamed
// and not, stop sequences, seeds, n, logprobs, tools, a client that aborts mid-stream; and llama.cpp's /tokenize,
// /detokenize and /apply-template. On the Qwen3 fixture (random weights, Qwen3's own chat template).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, postJson, metric, settledMetric } from './js/serve.mjs';

let server, client;

before(async () => {
  server = await startServer();
  client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'none', maxRetries: 0 });
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, 'zinc serve ends cleanly on SIGTERM:\n' + server.log());
});

const user = text => [{ role: 'user', content: text }];

test('chat completion, whole and streamed: the same greedy reply, usage, finish reasons', async () => {
  const whole = await client.chat.completions.create({ messages: user('Hello there'), max_tokens: 6, temperature: 0 });
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices.length, 1);
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.equal(typeof whole.choices[0].message.content, 'string');
  assert.equal(whole.choices[0].finish_reason, 'length');
  assert.equal(whole.usage.completion_tokens, 6);
  assert.ok(whole.usage.prompt_tokens > 5);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 6);

  const stream = await client.chat.completions.create({
    messages: user('Hello there'), max_tokens: 6, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks >= 3);
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, 'length');
  // The same usage, but that the repeated prompt was found cached, all of it but the token evaluated for its logits.
  assert.deepEqual(usage, { ...whole.usage, prompt_tokens_details: { cached_tokens: whole.usage.prompt_tokens - 1 } });
});

test('completions: a string or token ids, whole and streamed, echo', async () => {
  const prompt = 'The quick brown fox';
  const whole = await client.completions.create({ model: 'any', prompt, max_tokens: 8, temperature: 0 });
  assert.equal(whole.object, 'text_completion');
  assert.equal(whole.usage.completion_tokens, 8);
  const text = whole.choices[0].text;
  assert.equal(typeof text, 'string');

  const { json: tokens } = await postJson(server.url, '/tokenize', { content: prompt });
  assert.equal(whole.usage.prompt_tokens, tokens.tokens.length);
  const byIds = await client.completions.create({ model: 'any', prompt: tokens.tokens, max_tokens: 8, temperature: 0 });
  assert.equal(byIds.choices[0].text, text);

  const stream = await client.completions.create({ model: 'any', prompt, max_tokens: 8, temperature: 0, stream: true });
  let streamed = '', finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      streamed += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(streamed, text);
  assert.equal(finish, 'length');

  const echoed = await client.completions.create({ model: 'any', prompt, max_tokens: 8, temperature: 0, echo: true });
  assert.equal(echoed.choices[0].text, prompt + text);

  const two = await client.completions.create({ model: 'any', prompt: [prompt, 'Another prompt'], max_tokens: 4,
                                                temperature: 0 });
  assert.deepEqual(two.choices.map(c => c.index), [0, 1]);
  assert.equal(two.choices[0].text, (await client.completions.create({ model: 'any', prompt, max_tokens: 4,
                                                                       temperature: 0 })).choices[0].text);
});

test('stop sequences end the reply where they begin and are never in it', async () => {
  const prompt = 'Count with me:';
  const ask = extra => client.completions.create({ model: 'any', prompt, max_tokens: 24, temperature: 0, ...extra });
  const full = (await ask({})).choices[0].text;
  assert.ok(full.length >= 8, 'the fixture writes enough to cut: ' + JSON.stringify(full));
  const stop = full.slice(4, 7);
  const want = full.slice(0, full.indexOf(stop));
  const cut = await ask({ stop: [stop] });
  assert.equal(cut.choices[0].text, want);
  assert.equal(cut.choices[0].finish_reason, 'stop');

  const stream = await ask({ stop, stream: true });
  let streamed = '';
  for await (const chunk of stream) for (const c of chunk.choices) streamed += c.text;
  assert.equal(streamed, want);

  const chatFull = (await client.chat.completions.create({ messages: user('Count'), max_tokens: 16, temperature: 0 }))
    .choices[0].message.content;
  if (chatFull.length >= 6) {
    const s = chatFull.slice(3, 6);
    const chatCut = await client.chat.completions.create({ messages: user('Count'), max_tokens: 16, temperature: 0,
                                                           stop: s });
    assert.equal(chatCut.choices[0].message.content, chatFull.slice(0, chatFull.indexOf(s)));
    assert.equal(chatCut.choices[0].finish_reason, 'stop');
  }
});

test('a seed makes sampling repeatable; choice i of n samples with seed + i', async () => {
  const ask = (seed, n = 1) => client.chat.completions.create({
    messages: user('Tell me a story'), max_tokens: 10, temperature: 1, top_k: 0, top_p: 1, min_p: 0, seed, n });
  const a = await ask(1234), b = await ask(1234), c = await ask(99);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  assert.notEqual(a.choices[0].message.content, c.choices[0].message.content);

  const three = await ask(1234, 3);
  assert.deepEqual(three.choices.map(x => x.index), [0, 1, 2]);
  assert.equal(three.choices[0].message.content, a.choices[0].message.content);
  assert.equal(three.choices[1].message.content, (await ask(1235)).choices[0].message.content);
  assert.equal(three.usage.completion_tokens, 30);
  assert.equal(three.usage.prompt_tokens, a.usage.prompt_tokens);

  // Streamed, each chunk names its choice; the choices' texts are the whole answer's.
  const stream = await client.chat.completions.create({
    messages: user('Tell me a story'), max_tokens: 10, temperature: 1, top_k: 0, top_p: 1, min_p: 0, seed: 1234, n: 3,
    stream: true });
  const texts = ['', '', ''];
  for await (const chunk of stream) for (const ch of chunk.choices) texts[ch.index] += ch.delta.content ?? '';
  assert.deepEqual(texts, three.choices.map(x => x.message.content));
});

test('logprobs: chat content[] with top_logprobs, the legacy form of completions', async () => {
  const r = await client.chat.completions.create({
    messages: user('Hi'), max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 3 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 5);
  for (const t of content) {
    assert.ok(t.logprob <= 0);
    assert.ok(t.bytes.every(b => Number.isInteger(b) && b >= 0 && b < 256));
    if (!t.token.includes('\uFFFD')) assert.deepEqual(t.bytes, [...Buffer.from(t.token, 'utf8')]);
    assert.equal(t.top_logprobs.length, 3);
    // Greedy: the chosen token is the most likely one, and the alternatives come most likely first.
    assert.equal(t.top_logprobs[0].token, t.token);
    assert.equal(t.top_logprobs[0].logprob, t.logprob);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
    assert.ok(t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob);
  }
  const bytes = Buffer.concat(content.map(t => Buffer.from(t.bytes)));
  assert.equal(bytes.toString('utf8').trim(), r.choices[0].message.content.trim());

  const stream = await client.chat.completions.create({
    messages: user('Hi'), max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 3, stream: true });
  const streamed = [];
  for await (const chunk of stream)
    for (const c of chunk.choices) if (c.logprobs) streamed.push(...c.logprobs.content);
  assert.deepEqual(streamed, content);

  const none = await client.chat.completions.create({ messages: user('Hi'), max_tokens: 2, temperature: 0 });
  assert.equal(none.choices[0].logprobs, null);

  const c = await client.completions.create({ model: 'any', prompt: 'Once upon', max_tokens: 4, temperature: 0,
                                              logprobs: 2 });
  const lp = c.choices[0].logprobs;
  assert.equal(lp.tokens.length, 4);
  assert.equal(lp.token_logprobs.length, 4);
  assert.equal(lp.top_logprobs.length, 4);
  assert.equal(lp.tokens.join(''), c.choices[0].text);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 1; i < 4; i++)
    assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + Buffer.byteLength(lp.tokens[i - 1]));
  for (let i = 0; i < 4; i++) {
    assert.equal(Object.keys(lp.top_logprobs[i]).length, 2);
    assert.equal(Math.max(...Object.values(lp.top_logprobs[i])), lp.token_logprobs[i]);
  }
});

test('tools: offered through the chat template, narrowed by tool_choice, calls and results given back', async () => {
  const city = { type: 'object', properties: { city: { type: 'string' } } };
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
                                                 parameters: city } },
                 { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } }];
  const plain = await postJson(server.url, '/apply-template', { messages: user('Weather in Paris?') });
  assert.equal(plain.status, 200);
  assert.ok(!plain.json.prompt.includes('get_weather'));
  const offered = await postJson(server.url, '/apply-template', { messages: user('Weather in Paris?'), tools });
  assert.ok(offered.json.prompt.includes('<tools>'), offered.json.prompt);
  assert.ok(offered.json.prompt.includes('"get_weather"') && offered.json.prompt.includes('"get_time"'));
  assert.ok(offered.json.prompt.endsWith('<|im_start|>assistant\n'));
  const named = await postJson(server.url, '/apply-template', {
    messages: user('Weather?'), tools, tool_choice: { type: 'function', function: { name: 'get_time' } } });
  assert.ok(named.json.prompt.includes('"get_time"') && !named.json.prompt.includes('"get_weather"'));
  const none = await postJson(server.url, '/apply-template',
                              { messages: user('Weather?'), tools, tool_choice: 'none' });
  assert.ok(!none.json.prompt.includes('<tools>'));

  // A call the model made and its result, given back: the template renders both.
  const conversation = [
    ...user('Weather in Paris?'),
    { role: 'assistant', content: null, tool_calls: [
      { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '18 degrees, sunny' },
  ];
  const round = await postJson(server.url, '/apply-template', { messages: conversation, tools });
  assert.equal(round.status, 200, round.text);
  assert.ok(round.json.prompt.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'),
            round.json.prompt);
  assert.ok(round.json.prompt.includes('<tool_response>\n18 degrees, sunny\n</tool_response>'));

  const r = await client.chat.completions.create({ messages: conversation, tools, max_tokens: 4, temperature: 0 });
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(['length', 'stop', 'tool_calls'].includes(r.choices[0].finish_reason));

  await assert.rejects(client.chat.completions.create({ messages: user('x'), tools, tool_choice: 'sometimes' }),
                       e => e.status === 400 && e.param === 'tool_choice');
  await assert.rejects(client.chat.completions.create({ messages: user('x'), tools: [{ type: 'function' }] }),
                       e => e.status === 400 && e.param === 'tools');
});

test('errors come back as OpenAI errors the client understands', async () => {
  await assert.rejects(client.chat.completions.create({ messages: user('x'), temperature: 5 }),
                       e => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
  await assert.rejects(client.chat.completions.create({ messages: user('x'), max_tokens: 10 ** 9 }),
                       e => e.status === 400 && e.param === 'max_tokens');
  await assert.rejects(client.completions.create({ model: 'any', prompt: [1, 2, 10 ** 8] }),
                       e => e.status === 400 && e.param === 'prompt');
  await assert.rejects(client.completions.create({ model: 'any', prompt: 'word '.repeat(6000) }),
                       e => e.status === 400 && e.code === 'context_length_exceeded');
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, 'qwen3-q8_0.gguf');
});

test('a client that aborts mid-stream ends its generation; the next request is served', async () => {
  const before = await metric(server.url, 'zinc_cancelled_total{reason="client_gone"}');
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { messages: user('Write a long story'), max_tokens: 3000, temperature: 0, stream: true },
    { signal: controller.signal });
  let pieces = 0;
  try {
    for await (const chunk of stream)
      if (chunk.choices[0]?.delta?.content && ++pieces === 3) controller.abort();
  } catch (e) {
    // The client ends the iteration quietly or with its abort error, depending on when the abort lands.
    assert.ok(e.name === 'AbortError' || e instanceof OpenAI.APIUserAbortError, String(e));
  }
  assert.ok(pieces >= 3 && pieces < 100, `the stream ended at the abort (${pieces} pieces)`);
  const next = await client.chat.completions.create({ messages: user('Hi'), max_tokens: 3, temperature: 0 });
  assert.equal(next.usage.completion_tokens, 3);
  assert.equal(await metric(server.url, 'zinc_cancelled_total{reason="client_gone"}'), before + 1);
  assert.equal(await settledMetric(server.url, 'zinc_requests_in_flight', 0), 0);
});

test('/tokenize and /detokenize as llama.cpp has them; /metrics counts what happened', async () => {
  const t = await postJson(server.url, '/tokenize', { content: 'Hello, wörld!' });
  assert.equal(t.status, 200);
  assert.ok(t.json.tokens.every(Number.isInteger));
  const d = await postJson(server.url, '/detokenize', { tokens: t.json.tokens });
  assert.equal(d.json.content, 'Hello, wörld!');
  const p = await postJson(server.url, '/tokenize', { content: 'Hello, wörld!', with_pieces: true });
  assert.equal(p.json.tokens.length, t.json.tokens.length);
  assert.deepEqual(p.json.tokens.map(x => x.id), t.json.tokens);
  // A piece is a string, or its bytes when it is only part of a character (ö may be split).
  const joined = Buffer.concat(p.json.tokens.map(x => Buffer.from(x.piece)));
  assert.equal(joined.toString('utf8'), 'Hello, wörld!');
  const special = await postJson(server.url, '/tokenize', { content: '<|im_start|>', parse_special: true });
  assert.equal(special.json.tokens.length, 1);

  const text = await (await fetch(server.url + '/metrics')).text();
  assert.match(text, /zinc_requests_total\{endpoint="\/v1\/chat\/completions",status="200"\} \d+/);
  assert.match(text, /zinc_requests_total\{endpoint="\/v1\/completions",status="400"\} \d+/);
  assert.ok((await metric(server.url, 'zinc_generated_tokens_total')) > 50);
  assert.ok((await metric(server.url, 'zinc_prompt_tokens_total')) > 0);
  assert.ok((await metric(server.url, 'zinc_generation_tokens_per_second')) > 0);
  assert.equal(await settledMetric(server.url, 'zinc_requests_waiting', 0), 0);
  assert.equal(await metric(server.url, 'zinc_model_ready'), 1);
});
