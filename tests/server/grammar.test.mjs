// Constrained generation through the official `openai` npm client: response_format json_object (replies that parse
// as JSON objects, several requests sampled in parallel), llama-server's `grammar` passed in the request body as the
// client passes fields it does not know, and the refusals: a malformed grammar (400 at its line and column, the
// server serving on), response_format json_schema (replies that validate; a keyword outside the supported set
// refused by name), and a grammar on a model that would reason first. On the Qwen3 fixture
// (random weights, Qwen3's own chat template), with several sequences and with one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './js/serve.mjs';

let server, client;

before(async () => {
  server = await startServer(['-np', '4']);
  client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'none', maxRetries: 0 });
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, 'zinc serve ends cleanly on SIGTERM:\n' + server.log());
});

const user = text => [{ role: 'user', content: text }];
const noThinking = { chat_template_kwargs: { enable_thinking: false } };

// The reply is a whole JSON document whose top level is an object.
function assertJsonObject(text) {
  let value;
  assert.doesNotThrow(() => { value = JSON.parse(text); }, 'not JSON: ' + JSON.stringify(text));
  assert.equal(typeof value, 'object', text);
  assert.ok(value !== null && !Array.isArray(value), text);
}

test('response_format json_object: five sampled replies in parallel each parse as a JSON object', async () => {
  const replies = await Promise.all([1, 2, 3, 4, 5].map(seed => client.chat.completions.create({
    messages: user('Describe a cat as JSON'), response_format: { type: 'json_object' }, temperature: 1, seed,
    max_tokens: 400, ...noThinking,
  })));
  for (const r of replies) {
    assert.equal(r.choices[0].finish_reason, 'stop', r.choices[0].message.content);
    assertJsonObject(r.choices[0].message.content);
  }
  // The same seed gives the same constrained reply.
  const again = await client.chat.completions.create({
    messages: user('Describe a cat as JSON'), response_format: { type: 'json_object' }, temperature: 1, seed: 3,
    max_tokens: 400, ...noThinking,
  });
  assert.equal(again.choices[0].message.content, replies[2].choices[0].message.content);
});

test('response_format json_object streamed on completions', async () => {
  const stream = await client.completions.create({
    model: 'any', prompt: 'A JSON object:', response_format: { type: 'json_object' }, temperature: 0.8, seed: 9,
    max_tokens: 400, stream: true,
  });
  let text = '', finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(finish, 'stop', text);
  assertJsonObject(text);
});

test('grammar in the request body: completions and chat, every choice of n', async () => {
  const grammar = 'root ::= "yes" | "no" | [0-9]{1,3} " apples"\n';
  const done = await client.completions.create({ model: 'any', prompt: 'Answer:', grammar, n: 3, temperature: 1,
                                                 seed: 4, max_tokens: 20 });
  assert.equal(done.choices.length, 3);
  for (const c of done.choices) {
    assert.match(c.text, /^(yes|no|[0-9]{1,3} apples)$/);
    assert.equal(c.finish_reason, 'stop');
  }
  const chat = await client.chat.completions.create({ messages: user('Yes or no?'), grammar, temperature: 0,
                                                      max_tokens: 20, ...noThinking });
  assert.match(chat.choices[0].message.content, /^(yes|no|[0-9]{1,3} apples)$/);
});

test('a malformed grammar gets 400 at its line and column, and the server serves on', async () => {
  await assert.rejects(
    client.completions.create({ model: 'any', prompt: 'x', grammar: 'root ::= "a"\nitem ::= [a-', max_tokens: 4 }),
    e => e.status === 400 && /line 2, column \d+/.test(e.message) && e.param === 'grammar');
  await assert.rejects(
    client.chat.completions.create({ messages: user('x'), grammar: 'root ::= undefined-rule', ...noThinking }),
    e => e.status === 400 && /line 1, column 10: .*undefined-rule/.test(e.message));
  const ok = await client.completions.create({ model: 'any', prompt: 'x', grammar: 'root ::= "ok"', max_tokens: 4 });
  assert.equal(ok.choices[0].text, 'ok');
});

test('response_format json_schema: sampled replies validate against the schema', async () => {
  const schema = {
    type: 'object', additionalProperties: false, required: ['name', 'age'],
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 12 },
      age: { type: 'integer', minimum: 0, maximum: 120 },
      tags: { type: 'array', items: { enum: ['cat', 'dog'] }, maxItems: 3 },
    },
  };
  const replies = await Promise.all([1, 2, 3, 4].map(seed => client.chat.completions.create({
    messages: user('A person as JSON'), temperature: 1, seed, max_tokens: 300, ...noThinking,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
  })));
  for (const r of replies) {
    const text = r.choices[0].message.content;
    assert.equal(r.choices[0].finish_reason, 'stop', text);
    const v = JSON.parse(text);
    assert.deepEqual(Object.keys(v).filter(k => !['name', 'age', 'tags'].includes(k)), [], text);
    assert.ok(typeof v.name === 'string' && [...v.name].length >= 1 && [...v.name].length <= 12, text);
    assert.ok(Number.isInteger(v.age) && v.age >= 0 && v.age <= 120, text);
    if ('tags' in v) {
      assert.ok(Array.isArray(v.tags) && v.tags.length <= 3, text);
      assert.ok(v.tags.every(t => t === 'cat' || t === 'dog'), text);
    }
  }
  await assert.rejects(
    client.chat.completions.create({ messages: user('x'), ...noThinking, response_format: {
      type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', not: { required: ['a'] } } } } }),
    e => e.status === 400 && /'not' is not supported/.test(e.message) && e.param === 'response_format');
});

test('refused: a grammar where the model would reason before its answer', async () => {
  await assert.rejects(
    client.chat.completions.create({ messages: user('x'), response_format: { type: 'json_object' } }),
    e => e.status === 400 && /enable_thinking/.test(e.message));
  const text = await client.chat.completions.create({ messages: user('x'), response_format: { type: 'text' },
                                                      max_tokens: 2 });
  assert.equal(text.choices[0].finish_reason, 'length');
});

test('one sequence: the session constrains the reply too', async () => {
  const one = await startServer(['-np', '1', '--cache-seqs', '0']);
  try {
    const c = new OpenAI({ baseURL: one.url + '/v1', apiKey: 'none', maxRetries: 0 });
    const ask = { model: 'any', prompt: 'A JSON object:', response_format: { type: 'json_object' }, temperature: 0.8,
                  seed: 9, max_tokens: 400 };
    const alone = await c.completions.create(ask);
    assert.equal(alone.choices[0].finish_reason, 'stop', alone.choices[0].text);
    assertJsonObject(alone.choices[0].text);
    await assert.rejects(c.completions.create({ ...ask, response_format: undefined, grammar: 'root ::= ("a"' }),
                         e => e.status === 400 && /line 1, column/.test(e.message));
  } finally {
    await one.stop();
  }
});
