// Load on an OpenAI-compatible server (zinc serve, llama-server, ...) through the official `openai` client, as its
// users' programs would put it:
//
//   node bench/serve_load.mjs --url http://127.0.0.1:8080/v1 [--concurrency 1,4,16,64] [--requests 4]
//                             [--max-tokens 128] [--prompt-words 64] [--completions] [--agent] [--turns 20] [--json]
//
// Load: for each concurrency C, C clients at once, each sending --requests streamed greedy chat requests one after
// another (a prompt of its own of about --prompt-words words, --max-tokens tokens at most, the end of turn ignored
// where the server allows it). Per level: the aggregate decode rate (completion tokens over the level's wall time),
// time to first token and time between tokens (p50 / p99 over every request and every gap between two streamed
// pieces of text), and the requests that failed. --completions sends the load to /v1/completions, the prompt as text:
// no chat template and no parsing of the reply, which a server may refuse for a random-weight model's text.
//
// --agent: one conversation of --turns turns as an agent holds it: a shared system prompt with tool definitions,
// thinking on, earlier turns that called tools and got their results, and the reasoning of earlier replies, which
// templates such as Qwen3's drop from the history. Each turn sends the whole conversation so far; per turn it
// reports the prompt's tokens, those the server says it found cached (OpenAI's usage.prompt_tokens_details.
// cached_tokens, or llama-server's timings.cache_n) and so the tokens it evaluated.
//
// For a side by side with llama-server, make the model with `zinc synth ... --text-only` (bench/results/README.md):
// llama-server refuses replies that are not whole UTF-8 text, which a random model's greedy decoding writes.
//
// It waits for the server's /health to answer 200 first. The `openai` package is the one the server tests install
// (tests/server, npm ci; scripts/setup.sh does it).
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';

const require = createRequire(new URL('../tests/server/package.json', import.meta.url));
const OpenAI = require('openai');

function parseArgs(argv) {
  const o = { url: 'http://127.0.0.1:8080/v1', concurrency: [1, 4, 16, 64], requests: 4, maxTokens: 128,
              promptWords: 64, completions: false, agent: false, turns: 20, json: false, apiKey: 'none',
              model: 'any' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = () => {
      if (i + 1 >= argv.length) throw new Error(`no value after ${a}`);
      return argv[++i];
    };
    const count = (name, s) => {
      const n = Number(s);
      if (!Number.isInteger(n) || n < 1) throw new Error(`${name} takes a whole number of at least 1, not ${s}`);
      return n;
    };
    if (a === '--url') o.url = v();
    else if (a === '--api-key') o.apiKey = v();
    else if (a === '--model') o.model = v();
    else if (a === '--concurrency') o.concurrency = v().split(',').map(s => count('--concurrency', s));
    else if (a === '--requests') o.requests = count(a, v());
    else if (a === '--max-tokens') o.maxTokens = count(a, v());
    else if (a === '--prompt-words') o.promptWords = count(a, v());
    else if (a === '--completions') o.completions = true;
    else if (a === '--agent') o.agent = true;
    else if (a === '--turns') o.turns = count(a, v());
    else if (a === '--json') o.json = true;
    else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

const WORDS = ('the jury said that a report of the city council on the bond issue was read by the clerk and then ' +
               'filed as the members asked for a vote on each of the points it made about schools roads and water')
  .split(' ');

// A prompt of its own for client c's request r: the same length for every request, different words.
function promptOf(c, r, words) {
  const out = [`Request ${r} of client ${c}:`];
  for (let i = 0; i < words; i++) out.push(WORDS[(c * 7 + r * 13 + i * (c + 3)) % WORDS.length]);
  return out.join(' ') + '. Continue the story.';
}

function quantile(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

// One streamed request: when its first text came, the gaps between its pieces of text, its completion tokens.
async function streamed(client, o, messages, extra = {}) {
  const t0 = performance.now();
  let first = null, last = null, tokens = 0;
  const gaps = [];
  let usage = null;
  const common = { model: o.model, max_tokens: o.maxTokens, temperature: 0, stream: true,
                   stream_options: { include_usage: true }, ignore_eos: true, ...extra };
  const stream = o.completions && !o.agent
    ? await client.completions.create({ prompt: messages.map(m => m.content).join('\n'), ...common })
    : await client.chat.completions.create({ messages, ...common });
  let text = '', reasoning = '';
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if (chunk.timings) usage = { ...(usage || {}), timings: chunk.timings };
    for (const ch of chunk.choices || []) {
      const content = ch.text ?? ch.delta?.content ?? '';
      const piece = content + (ch.delta?.reasoning_content || '');
      if (!piece) continue;
      text += content;
      reasoning += ch.delta?.reasoning_content || '';
      const now = performance.now();
      if (first === null) first = now - t0;
      else gaps.push(now - last);
      last = now;
    }
  }
  tokens = usage?.completion_tokens ?? 0;
  return { ttft: first, gaps, tokens, usage, text, reasoning };
}

async function loadLevel(client, o, c) {
  const ttft = [], gaps = [];
  let tokens = 0, failed = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: c }, async (_, k) => {
    for (let r = 0; r < o.requests; r++) {
      try {
        const res = await streamed(client, o, [{ role: 'user', content: promptOf(k, r, o.promptWords) }]);
        if (res.ttft !== null) ttft.push(res.ttft);
        gaps.push(...res.gaps);
        tokens += res.tokens;
      } catch (e) {
        failed++;
        if (failed === 1) console.error(`concurrency ${c}: ${e.message}`);
      }
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  ttft.sort((a, b) => a - b);
  gaps.sort((a, b) => a - b);
  return { concurrency: c, requests: c * o.requests, failed, completion_tokens: tokens, seconds,
           tok_per_s: tokens / seconds, ttft_ms_p50: quantile(ttft, 0.5), ttft_ms_p99: quantile(ttft, 0.99),
           tbt_ms_p50: quantile(gaps, 0.5), tbt_ms_p99: quantile(gaps, 0.99) };
}

const TOOLS = [
  { type: 'function', function: { name: 'read_file', description: 'Read a file of the repository.',
    parameters: { type: 'object', properties: { path: { type: 'string', description: 'the file' } },
                  required: ['path'] } } },
  { type: 'function', function: { name: 'run_tests', description: 'Run the test suite, or the tests named.',
    parameters: { type: 'object', properties: { filter: { type: 'string', description: 'a test name pattern' } } } } },
  { type: 'function', function: { name: 'search', description: 'Search the repository for a string.',
    parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } } },
];

const SYSTEM = 'You are a coding agent working in a C++ repository. Think before each step, call one tool at a ' +
  'time, read what it returns, and stop when the task is done. Keep answers short. ' +
  'The repository builds with CMake and Ninja; its tests run with ctest; the code follows the style of its files.';

// The agent conversation: every other turn the assistant called a tool (a scripted call and result, as a recorded
// session has them); the others are the model's own replies to a user's next instruction.
async function agent(client, o) {
  const messages = [{ role: 'system', content: SYSTEM },
                    { role: 'user', content: 'The test ParserHandlesEmptyInput fails. Find out why and fix it.' }];
  const turns = [];
  for (let t = 0; t < o.turns; t++) {
    const res = await streamed(client, o, messages, { tools: TOOLS, chat_template_kwargs: { enable_thinking: true } });
    const u = res.usage || {};
    const prompt = u.prompt_tokens ?? u.timings?.prompt_n ?? NaN;
    const cached = u.prompt_tokens_details?.cached_tokens ?? u.timings?.cache_n ?? 0;
    const evaluated = u.timings?.prompt_n ?? prompt - cached;
    turns.push({ turn: t + 1, prompt_tokens: prompt, cached_tokens: cached, evaluated_tokens: evaluated,
                 completion_tokens: res.tokens, ttft_ms: res.ttft });
    // What the model said, with its reasoning, which the template may drop from later prompts.
    messages.push({ role: 'assistant', content: res.text || 'Let me look.', reasoning_content: res.reasoning });
    if (t % 2 === 0) {
      const id = `call_${t}`;
      const call = [{ name: 'read_file', args: { path: `src/parser_${t}.cpp` } },
                    { name: 'search', args: { query: `empty input ${t}` } },
                    { name: 'run_tests', args: { filter: 'Parser*' } }][t % 3];
      messages.push({ role: 'assistant', content: '', tool_calls: [{ id, type: 'function',
                      function: { name: call.name, arguments: JSON.stringify(call.args) } }] });
      messages.push({ role: 'tool', tool_call_id: id,
                      content: `${call.name} returned: ` + promptOf(t, 0, 40) });
    } else {
      messages.push({ role: 'user', content: `Good. Now step ${t + 1}: check the next place where the input may ` +
                      'be empty, and say what you changed.' });
    }
  }
  return turns;
}

function fmt(x, digits = 1) { return Number.isFinite(x) ? x.toFixed(digits) : '-'; }

// Waits until the server's /health (beside the API's /v1) answers 200: zinc serve and llama-server answer 503 while
// they load the model.
async function waitReady(o) {
  const health = o.url.replace(/\/v1\/?$/, '') + '/health';
  const until = performance.now() + 600000;
  for (;;) {
    try {
      if ((await fetch(health)).status === 200) return;
    } catch {
      // not listening yet
    }
    if (performance.now() > until) throw new Error(`${health} did not answer 200 within 10 minutes`);
    await new Promise(resolve => setTimeout(resolve, 250));
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const client = new OpenAI({ baseURL: o.url, apiKey: o.apiKey, maxRetries: 0, timeout: 600000 });
  await waitReady(o);
  const report = { url: o.url, endpoint: o.completions && !o.agent ? 'completions' : 'chat/completions',
                   max_tokens: o.maxTokens, prompt_words: o.promptWords, requests_per_client: o.requests };
  if (o.agent) {
    report.agent = await agent(client, o);
  } else {
    report.levels = [];
    for (const c of o.concurrency) {
      const level = await loadLevel(client, o, c);
      report.levels.push(level);
      if (!o.json) console.error(`concurrency ${c}: ${fmt(level.tok_per_s)} tok/s`);
    }
  }
  if (o.json) {
    console.log(JSON.stringify(report, null, 2));
    return;
  }
  if (report.levels) {
    console.log('| clients | requests | failed | tokens | s | tok/s | TTFT p50 ms | TTFT p99 ms | TBT p50 ms | TBT p99 ms |');
    console.log('|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|');
    for (const l of report.levels)
      console.log(`| ${l.concurrency} | ${l.requests} | ${l.failed} | ${l.completion_tokens} | ${fmt(l.seconds, 2)} | ` +
                  `${fmt(l.tok_per_s)} | ${fmt(l.ttft_ms_p50)} | ${fmt(l.ttft_ms_p99)} | ${fmt(l.tbt_ms_p50, 2)} | ` +
                  `${fmt(l.tbt_ms_p99, 2)} |`);
  } else {
    console.log('| turn | prompt tokens | cached | evaluated | generated | TTFT ms |');
    console.log('|--:|--:|--:|--:|--:|--:|');
    for (const t of report.agent)
      console.log(`| ${t.turn} | ${t.prompt_tokens} | ${t.cached_tokens} | ${t.evaluated_tokens} | ` +
                  `${t.completion_tokens} | ${fmt(t.ttft_ms)} |`);
  }
}

main().catch(e => {
  console.error(`serve_load: ${e.message}`);
  process.exit(1);
});
