// A real `zinc serve` for the Node.js tests: started on a free port on a fixture model, read from its standard error
// until it is ready, stopped with SIGTERM. The binary and the model come from the environment that ctest sets
// (ZINC_BINARY, ZINC_MODEL; tests/server/CMakeLists.txt).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

export const MODEL = process.env.ZINC_MODEL;

export async function startServer(extra = [], { model = MODEL } = {}) {
  const args = ['serve', '-m', model, '--port', '0', '-t', '1', ...extra];
  const child = spawn(process.env.ZINC_BINARY, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const url = await new Promise((resolve, reject) => {
    let port = null;
    const timer = setTimeout(() => reject(new Error('zinc serve did not get ready:\n' + log)), 120000);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', text => {
      log += text;
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) port = m[1];
      if (port && log.includes('zinc: ready')) {
        clearTimeout(timer);
        resolve('http://127.0.0.1:' + port);
      }
    });
    child.on('exit', code => {
      clearTimeout(timer);
      reject(new Error('zinc serve exited with ' + code + ':\n' + log));
    });
  });
  const exited = new Promise(resolve => child.on('exit', (code, signal) => resolve({ code, signal })));
  return {
    url,
    pid: child.pid,
    log: () => log,
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

// The server's resident memory in KiB, from /proc.
export function rssKiB(pid) {
  const m = readFileSync('/proc/' + pid + '/status', 'utf8').match(/VmRSS:\s+(\d+) kB/);
  return Number(m[1]);
}

export async function postJson(url, path, body, headers = {}) {
  const res = await fetch(url + path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON: the test says so */ }
  return { status: res.status, headers: res.headers, text, json };
}

// One value of the Prometheus text of /metrics: `name` with its labels as the server writes them.
export async function metric(url, name) {
  const text = await (await fetch(url + '/metrics')).text();
  const line = text.split('\n').find(l => l.startsWith(name + ' '));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

// Waits (a few seconds at most) for a metric to reach `value`, and returns what it last read: the scheduler counts a
// request out a moment after its client has its answer.
export async function settledMetric(url, name, value) {
  let v;
  for (let i = 0; i < 100; i++) {
    v = await metric(url, name);
    if (v === value) break;
    await new Promise(r => setTimeout(r, 20));
  }
  return v;
}
