#!/usr/bin/env node
// Measures a running `zinc serve` as an application sees it: one streamed chat request from the official `openai`
// npm client, timed by the client. Prints the time to the first token, the tokens per second after it (from the
// server's usage count) and the whole request's time.
//
//   node tools/serve/client.mjs [--url http://127.0.0.1:8080] [--prompt TEXT] [--max-tokens N] [--runs N] [--api-key K]
//
// The `openai` package is the one scripts/setup.sh installs for the server's tests (tests/server/node_modules).
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: o } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:8080' },
    prompt: { type: 'string', default: 'Write a short story about a lighthouse keeper.' },
    'max-tokens': { type: 'string', default: '256' },
    runs: { type: 'string', default: '3' },
    'api-key': { type: 'string', default: process.env.OPENAI_API_KEY || 'none' },
  },
});

const require = createRequire(new URL('../../tests/server/package.json', import.meta.url));
const { default: OpenAI } = await import(pathToFileURL(require.resolve('openai')).href);
const client = new OpenAI({ baseURL: o.url.replace(/\/$/, '') + '/v1', apiKey: o['api-key'], maxRetries: 0 });

const models = await client.models.list();
console.log(`model ${models.data[0].id}, prompt ${JSON.stringify(o.prompt)}, max_tokens ${o['max-tokens']}`);
for (let run = 1; run <= Number(o.runs); run++) {
  const t0 = performance.now();
  let first = null, last = null, usage = null, chars = 0;
  const stream = await client.chat.completions.create({
    model: models.data[0].id, messages: [{ role: 'user', content: o.prompt }], max_tokens: Number(o['max-tokens']),
    stream: true, stream_options: { include_usage: true },
  });
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const d = chunk.choices[0]?.delta;
    const text = (d?.content ?? '') + (d?.reasoning_content ?? '');
    if (text) {
      const now = performance.now();
      if (first === null) first = now;
      last = now;
      chars += text.length;
    }
  }
  const end = performance.now();
  const tokens = usage?.completion_tokens ?? 0;
  // The first token is the end of the wait; the speed counts the tokens after it over the time after it.
  const tps = tokens > 1 && last > first ? (tokens - 1) / ((last - first) / 1000) : 0;
  console.log(`run ${run}: prompt ${usage?.prompt_tokens} tokens, time to first token ${(first - t0).toFixed(1)} ms, ` +
              `${tokens} tokens at ${tps.toFixed(1)} tok/s, ${chars} characters, ` +
              `${((end - t0) / 1000).toFixed(2)} s in all`);
}
