// POST /v1/embeddings through the official `openai` npm client, on the Qwen3 fixture served with --pooling last: the
// float and base64 encodings give the same vectors, a list of inputs gives indexed results equal to each alone, token
// ids equal their text, dimensions cuts and renormalizes (and is refused beyond the model's width or without
// normalization), bad requests get clean 4xx errors, and chat is answered beside and after embeddings, on the
// generator's sequences (the default) and on a server of one sequence.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, postJson } from './js/serve.mjs';

let server, client;

before(async () => {
  server = await startServer(['--pooling', 'last']);
  client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'none', maxRetries: 0 });
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, 'zinc serve ends cleanly on SIGTERM:\n' + server.log());
});

const norm = v => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const fromBase64 = s => {
  const b = Buffer.from(s, 'base64');
  return Array.from(new Float32Array(b.buffer, b.byteOffset, b.length / 4));
};
const assertClose = (a, b, tol, what) => {
  assert.equal(a.length, b.length, what);
  const worst = Math.max(...a.map((x, i) => Math.abs(x - b[i])));
  assert.ok(worst <= tol, `${what}: values differ by ${worst}`);
};
const chatAnswers = async c => {
  const r = await c.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4,
                                             temperature: 0 });
  assert.equal(r.usage.completion_tokens, 4);
};

test('float and base64 give the same unit vectors; usage counts the tokens', async () => {
  const input = 'The quick brown fox jumps over the lazy dog';
  const floats = await client.embeddings.create({ model: 'any', input, encoding_format: 'float' });
  assert.equal(floats.object, 'list');
  assert.equal(floats.data.length, 1);
  assert.equal(floats.data[0].object, 'embedding');
  assert.equal(floats.data[0].index, 0);
  const v = floats.data[0].embedding;
  assert.ok(v.length >= 8);
  assert.ok(Math.abs(norm(v) - 1) < 1e-5);
  const { json: tokens } = await postJson(server.url, '/tokenize', { content: input, add_special: true });
  assert.deepEqual(floats.usage, { prompt_tokens: tokens.tokens.length, total_tokens: tokens.tokens.length });

  const b64 = await client.embeddings.create({ model: 'any', input, encoding_format: 'base64' });
  assert.equal(typeof b64.data[0].embedding, 'string');
  assert.deepEqual(fromBase64(b64.data[0].embedding), v.map(x => Math.fround(x)));
  // Without a format the client asks for base64 and decodes it.
  const plain = await client.embeddings.create({ model: 'any', input });
  assert.deepEqual(plain.data[0].embedding, fromBase64(b64.data[0].embedding));
});

test('a list of texts, token ids and lists of ids: indexed results, each its input alone', async () => {
  const texts = ['first text', 'a second, longer text than the first one', 'third'];
  const many = await client.embeddings.create({ model: 'any', input: texts, encoding_format: 'float' });
  assert.deepEqual(many.data.map(d => d.index), [0, 1, 2]);
  let total = 0;
  for (let i = 0; i < texts.length; i++) {
    const one = await client.embeddings.create({ model: 'any', input: texts[i], encoding_format: 'float' });
    assertClose(many.data[i].embedding, one.data[0].embedding, 1e-5, `input ${i}`);
    total += one.usage.prompt_tokens;
  }
  assert.equal(many.usage.prompt_tokens, total);

  const ids = [];
  for (const t of texts) ids.push((await postJson(server.url, '/tokenize', { content: t, add_special: true })).json.tokens);
  const byIds = await client.embeddings.create({ model: 'any', input: ids, encoding_format: 'float' });
  for (let i = 0; i < texts.length; i++)
    assertClose(byIds.data[i].embedding, many.data[i].embedding, 1e-5, `ids of input ${i}`);
  const oneIds = await client.embeddings.create({ model: 'any', input: ids[1], encoding_format: 'float' });
  assertClose(oneIds.data[0].embedding, many.data[1].embedding, 1e-5, 'one list of ids');
});

test('dimensions: the first values, scaled to length 1 again; refused past the width', async () => {
  const input = 'Matryoshka';
  const full = (await client.embeddings.create({ model: 'any', input, encoding_format: 'float' })).data[0].embedding;
  const cut = (await client.embeddings.create({ model: 'any', input, dimensions: 8, encoding_format: 'float' }))
    .data[0].embedding;
  assert.equal(cut.length, 8);
  assert.ok(Math.abs(norm(cut) - 1) < 1e-5);
  const head = full.slice(0, 8), n = norm(head);
  assertClose(cut, head.map(x => x / n), 1e-6, 'cut and renormalized');
  const same = await client.embeddings.create({ model: 'any', input, dimensions: full.length, encoding_format: 'float' });
  assert.deepEqual(same.data[0].embedding, full);
  for (const dimensions of [full.length + 1, 0, -3]) {
    await assert.rejects(client.embeddings.create({ model: 'any', input, dimensions }), e => {
      assert.equal(e.status, 400);
      assert.equal(e.param, 'dimensions');
      assert.match(e.message, new RegExp(`between 1 and ${full.length}`));
      return true;
    });
  }
});

test('bad requests get clean errors, and chat is answered after them', async () => {
  const { json: props } = await (async () => ({ json: await (await fetch(server.url + '/props')).json() }))();
  const nCtx = props.default_generation_settings.n_ctx;
  const cases = [
    [{ input: [] }, 400, 'input', /empty list/],
    [{ input: '' }, 400, 'input', /empty string/],
    [{ input: [[]] }, 400, 'input', /no tokens/],
    [{ input: [1, 'two'] }, 400, 'input', /token ids must be integers/],
    [{ input: ['a', [1]] }, 400, 'input', /must be a string/],
    [{ input: [-1] }, 400, 'input', /token ids/],
    [{ input: { text: 'x' } }, 400, 'input', /must be a string/],
    [{}, 400, 'input', /input is needed/],
    [{ input: 'x', encoding_format: 'hex' }, 400, 'encoding_format', /float.*base64/],
    [{ input: new Array(nCtx + 1).fill(11) }, 400, 'input', /not cut/],
    [{ input: new Array(513).fill('x') }, 400, 'input', /at most 512/],
    [{ input: new Array(300).fill(new Array(Math.min(nCtx, 256)).fill(11)) }, 413, 'input', /65536 tokens/],
  ];
  for (const [body, status, param, message] of cases) {
    const r = await postJson(server.url, '/v1/embeddings', body);
    assert.equal(r.status, status, JSON.stringify(body).slice(0, 80) + ': ' + r.text.slice(0, 200));
    assert.equal(r.json.error.param, param);
    assert.match(r.json.error.message, message);
  }
  const tooLong = await postJson(server.url, '/v1/embeddings', { input: new Array(nCtx + 1).fill(11) });
  assert.equal(tooLong.json.error.code, 'context_length_exceeded');
  const broken = await postJson(server.url, '/v1/embeddings', '{"input": ');
  assert.equal(broken.status, 400);
  await chatAnswers(client);
});

test('chat streams on beside an embeddings request, and both finish', async () => {
  const stream = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 24, temperature: 0, stream: true,
  });
  const texts = Array.from({ length: 12 }, (_, i) => `text number ${i} to embed, with a few more words`);
  const embedded = client.embeddings.create({ model: 'any', input: texts, encoding_format: 'float' });
  let generated = 0;
  for await (const chunk of stream) if (chunk.choices[0]?.delta?.content) generated++;
  const e = await embedded;
  assert.equal(e.data.length, texts.length);
  assert.ok(generated > 0);
  await chatAnswers(client);
});

test('one sequence (-np 1 --cache-seqs 0), as pooled (--no-normalize): the same directions; no dimensions', async () => {
  const one = await startServer(['--pooling', 'last', '-np', '1', '--cache-seqs', '0', '--no-normalize']);
  try {
    const c = new OpenAI({ baseURL: one.url + '/v1', apiKey: 'none', maxRetries: 0 });
    const texts = ['first text', 'a second text'];
    const raw = await c.embeddings.create({ model: 'any', input: texts, encoding_format: 'float' });
    const unit = await client.embeddings.create({ model: 'any', input: texts, encoding_format: 'float' });
    for (let i = 0; i < texts.length; i++) {
      const v = raw.data[i].embedding, n = norm(v);
      assert.ok(Math.abs(n - 1) > 1e-3, 'as pooled');
      assertClose(v.map(x => x / n), unit.data[i].embedding, 1e-5, `input ${i}`);
    }
    await assert.rejects(c.embeddings.create({ model: 'any', input: 'x', dimensions: 4 }), e => {
      assert.equal(e.status, 400);
      assert.match(e.message, /--no-normalize/);
      return true;
    });
    await chatAnswers(c);
  } finally {
    assert.equal((await one.stop()).code, 0);
  }
});

test('a file without pooling serves no embeddings unless --pooling says how; chat goes on', async () => {
  const bare = await startServer();
  try {
    const r = await postJson(bare.url, '/v1/embeddings', { input: 'x' });
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /--pooling/);
    await chatAnswers(new OpenAI({ baseURL: bare.url + '/v1', apiKey: 'none', maxRetries: 0 }));
  } finally {
    assert.equal((await bare.stop()).code, 0);
  }
});
