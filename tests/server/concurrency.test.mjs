// 16 clients at once, 20 requests each, against one zinc serve running one request at a time on one sequence (-np 1
// --cache-seqs 0) and one decoding four sequences together (-np 4): every request a greedy completion of its own
// prompt, checked against the same request made alone, one at a time, so that a lost, mixed-up or cut answer shows;
// the server must not crash, must count every request, and must not grow in memory as the requests go by.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, rssKiB, metric, settledMetric } from './js/serve.mjs';

const CLIENTS = 16, REQUESTS = 20, TOKENS = 6;
// One server that runs one request at a time on its session, one that decodes four sequences together.
const servers = {}, clients = {};

before(async () => {
  // A queue that holds every client, so that none is turned away with 503 (that is tested apart).
  for (const np of [1, 4]) {
    const session = np === 1 ? ['--cache-seqs', '0'] : [];  // one sequence: the session, not the generator
    servers[np] = await startServer(['--max-queue', String(CLIENTS), '-np', String(np), ...session]);
    clients[np] = new OpenAI({ baseURL: servers[np].url + '/v1', apiKey: 'none', maxRetries: 0, timeout: 120000 });
  }
});
after(async () => {
  for (const server of Object.values(servers)) {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  }
});

const prompt = (c, r) => `Client ${c} asks question ${r}: what comes after ${c * 100 + r}?`;
const ask = (client, c, r, stream) => stream
  ? client.completions.create({ model: 'any', prompt: prompt(c, r), max_tokens: TOKENS, temperature: 0, stream: true })
  : client.completions.create({ model: 'any', prompt: prompt(c, r), max_tokens: TOKENS, temperature: 0 });

async function answer(client, c, r) {
  // Half the requests stream, so both paths run side by side.
  if ((c + r) % 2 === 0) return (await ask(client, c, r, false)).choices[0].text;
  let text = '';
  for await (const chunk of await ask(client, c, r, true)) for (const ch of chunk.choices) text += ch.text;
  return text;
}

// Each answer alone first, one request at a time: what the concurrent runs must give back.
let alone = null;
async function answersAlone() {
  if (alone) return alone;
  alone = [];
  for (let c = 0; c < CLIENTS; c++) {
    alone.push([]);
    for (let r = 0; r < REQUESTS; r++) alone[c].push((await ask(clients[1], c, r, false)).choices[0].text);
  }
  const distinct = new Set(alone.flat());
  assert.ok(distinct.size > CLIENTS, 'distinct prompts give distinct answers, so a mix-up would show');
  return alone;
}

for (const np of [1, 4]) {
  test(`-np ${np}: ${CLIENTS} clients x ${REQUESTS} requests at once: every answer is its own, memory stays bounded`,
       async () => {
    const want = await answersAlone();
    const server = servers[np], client = clients[np];
    const rssBefore = rssKiB(server.pid);
    // None yet on the server that has not answered a completion (NaN: no such line).
    const requestsBefore =
      (await metric(server.url, 'zinc_requests_total{endpoint="/v1/completions",status="200"}')) || 0;

    const t0 = Date.now();
    const results = await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
      const got = [];
      for (let r = 0; r < REQUESTS; r++) got.push(await answer(client, c, r));
      return got;
    }));
    const seconds = (Date.now() - t0) / 1000;
    for (let c = 0; c < CLIENTS; c++)
      for (let r = 0; r < REQUESTS; r++)
        assert.equal(results[c][r], want[c][r], `client ${c}, request ${r}`);

    const rssAfter = rssKiB(server.pid);
    console.log(`-np ${np}: ${CLIENTS * REQUESTS} concurrent requests in ${seconds.toFixed(1)} s; ` +
                `RSS ${(rssBefore / 1024).toFixed(1)} MiB before, ${(rssAfter / 1024).toFixed(1)} MiB after`);
    assert.ok(rssAfter - rssBefore < 64 * 1024, `RSS grew by ${rssAfter - rssBefore} KiB`);
    const counted = await settledMetric(server.url, 'zinc_requests_total{endpoint="/v1/completions",status="200"}',
                                        requestsBefore + CLIENTS * REQUESTS);
    assert.equal(counted, requestsBefore + CLIENTS * REQUESTS);
    assert.equal(await settledMetric(server.url, 'zinc_requests_in_flight', 0), 0);
    assert.equal(await settledMetric(server.url, 'zinc_requests_waiting', 0), 0);
    assert.equal((await fetch(server.url + '/health')).status, 200);
  });
}

// 64 clients x 20 requests on -np 4 with its prefix cache, some of them leaving in the middle of their streams and some
// reading slowly: the server serves them all, every answer that is read to its end is the one the request gets alone,
// nothing stays in flight, and the KV cache holds no page beyond those of the states its sequences keep.
test('-np 4: 64 clients with disconnects and slow readers: every answer read is its own, no page is lost',
     { timeout: 300000 }, async () => {
  const want = await answersAlone();
  const server = await startServer(['--max-queue', '64', '-np', '4']);
  try {
    const client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'none', maxRetries: 0, timeout: 120000 });
    let left = 0, slow = 0;
    await Promise.all(Array.from({ length: 64 }, async (_, c) => {
      for (let r = 0; r < REQUESTS; r++) {
        const k = c % CLIENTS;
        if ((c + r) % 5 === 1) {  // leaves after the first piece of its stream: leaving the loop aborts the request
          for await (const _ of await ask(client, k, r, true)) break;
          ++left;
        } else if ((c + r) % 7 === 3) {  // reads its stream a piece every 20 ms
          let text = '';
          for await (const chunk of await ask(client, k, r, true)) {
            for (const ch of chunk.choices) text += ch.text;
            await new Promise(resolve => setTimeout(resolve, 20));
          }
          assert.equal(text, want[k][r], `slow client ${c}, request ${r}`);
          ++slow;
        } else {
          assert.equal(await answer(client, k, r), want[k][r], `client ${c}, request ${r}`);
        }
      }
    }));
    assert.ok(left > 100 && slow > 100, `${left} left, ${slow} read slowly`);
    assert.equal(await settledMetric(server.url, 'zinc_requests_in_flight', 0), 0);
    assert.equal((await fetch(server.url + '/health')).status, 200);
    // Each sequence's state holds at most ceil(tokens / 64) pages (pages of 64 positions; fewer where shared).
    const slots = (await (await fetch(server.url + '/slots')).json()).slots;
    const held = slots.reduce((n, s) => n + Math.ceil(s.tokens_in_state / 64), 0);
    const used = await metric(server.url, 'zinc_kv_pages_used');
    assert.ok(used <= held, `${used} pages used, the kept states hold at most ${held}`);
  } finally {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  }
});
