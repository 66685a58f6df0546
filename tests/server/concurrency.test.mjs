// 16 clients at once, 20 requests each, against one zinc serve: every request a greedy completion of its own prompt,
// checked against the same request made alone, so that a lost, mixed-up or cut answer shows; the server must not
// crash, must count every request, and must not grow in memory as the requests go by.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, rssKiB, metric, settledMetric } from './js/serve.mjs';

const CLIENTS = 16, REQUESTS = 20, TOKENS = 6;
let server, client;

before(async () => {
  // A queue that holds every client, so that none is turned away with 503 (that is tested apart).
  server = await startServer(['--max-queue', String(CLIENTS)]);
  client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'none', maxRetries: 0, timeout: 120000 });
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, server.log());
});

const prompt = (c, r) => `Client ${c} asks question ${r}: what comes after ${c * 100 + r}?`;
const ask = (c, r, stream) => stream
  ? client.completions.create({ model: 'any', prompt: prompt(c, r), max_tokens: TOKENS, temperature: 0, stream: true })
  : client.completions.create({ model: 'any', prompt: prompt(c, r), max_tokens: TOKENS, temperature: 0 });

async function answer(c, r) {
  // Half the requests stream, so both paths run side by side.
  if ((c + r) % 2 === 0) return (await ask(c, r, false)).choices[0].text;
  let text = '';
  for await (const chunk of await ask(c, r, true)) for (const ch of chunk.choices) text += ch.text;
  return text;
}

test(`${CLIENTS} clients x ${REQUESTS} requests at once: every answer is its own, memory stays bounded`, async () => {
  // Each answer alone first: what the concurrent run must give back.
  const alone = [];
  for (let c = 0; c < CLIENTS; c++) {
    alone.push([]);
    for (let r = 0; r < REQUESTS; r++) alone[c].push((await ask(c, r, false)).choices[0].text);
  }
  const distinct = new Set(alone.flat());
  assert.ok(distinct.size > CLIENTS, 'distinct prompts give distinct answers, so a mix-up would show');
  const rssBefore = rssKiB(server.pid);
  const requestsBefore = await metric(server.url, 'zinc_requests_total{endpoint="/v1/completions",status="200"}');

  const t0 = Date.now();
  const results = await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
    const got = [];
    for (let r = 0; r < REQUESTS; r++) got.push(await answer(c, r));
    return got;
  }));
  const seconds = (Date.now() - t0) / 1000;
  for (let c = 0; c < CLIENTS; c++)
    for (let r = 0; r < REQUESTS; r++)
      assert.equal(results[c][r], alone[c][r], `client ${c}, request ${r}`);

  const rssAfter = rssKiB(server.pid);
  console.log(`${CLIENTS * REQUESTS} concurrent requests in ${seconds.toFixed(1)} s; ` +
              `RSS ${(rssBefore / 1024).toFixed(1)} MiB before, ${(rssAfter / 1024).toFixed(1)} MiB after`);
  assert.ok(rssAfter - rssBefore < 64 * 1024, `RSS grew by ${rssAfter - rssBefore} KiB`);
  const counted = await settledMetric(server.url, 'zinc_requests_total{endpoint="/v1/completions",status="200"}',
                                      requestsBefore + CLIENTS * REQUESTS);
  assert.equal(counted, requestsBefore + CLIENTS * REQUESTS);
  assert.equal(await settledMetric(server.url, 'zinc_requests_in_flight', 0), 0);
  assert.equal(await settledMetric(server.url, 'zinc_requests_waiting', 0), 0);
  assert.equal((await fetch(server.url + '/health')).status, 200);
});
