// zinc's chat page: conversations kept in this browser (localStorage), replies streamed from /v1/chat/completions and
// rendered as markdown with highlighted code, reasoning in a collapsible block, tool calls shown, a stop button, and
// time to first token and tok/s under each reply. Everything is here: the page loads nothing from elsewhere.
'use strict';

// ---- Markdown: a small renderer for what models write. Every piece of text is escaped before it becomes HTML, so a
// reply can never inject markup; links keep only http(s) and mailto addresses.

function escapeHtml(s) {
  return s.replace(/[&<>"']/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

function renderInline(text) {
  // Code spans first, kept aside so that nothing inside them is read as markup.
  const codes = [];
  let s = text.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (m, ticks, code) => {
    codes.push('<code>' + escapeHtml(code.trim() === '' ? code : code.replace(/^ (.*) $/s, '$1')) + '</code>');
    return '\u0000' + (codes.length - 1) + '\u0000';
  });
  s = escapeHtml(s);
  s = s.replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, (m, label, href) => {
    const raw = href.replace(/&amp;/g, '&');
    if (!/^(https?:|mailto:)/i.test(raw)) return label;
    return '<a href="' + href + '" target="_blank" rel="noopener noreferrer">' + label + '</a>';
  });
  s = s.replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, '<strong>$1</strong>');
  s = s.replace(/__(?=\S)([\s\S]*?\S)__/g, '<strong>$1</strong>');
  s = s.replace(/(^|[^*\w])\*(?=[^\s*])([^*]*?[^\s*])\*(?!\*)/g, '$1<em>$2</em>');
  s = s.replace(/(^|[^_\w])_(?=[^\s_])([^_]*?[^\s_])_(?![_\w])/g, '$1<em>$2</em>');
  s = s.replace(/~~(?=\S)([\s\S]*?\S)~~/g, '<del>$1</del>');
  return s.replace(/\u0000(\d+)\u0000/g, (m, i) => codes[Number(i)]);
}

function splitRow(line) {
  return line.trim().replace(/^\||\|$/g, '').split('|').map(c => c.trim());
}

function renderMarkdown(src) {
  const lines = src.replace(/\r\n?/g, '\n').split('\n');
  const out = [];
  let i = 0;
  const isBlank = l => /^\s*$/.test(l);
  const listItem = /^(\s*)([-*+]|\d+[.)])\s+(.*)$/;
  const tableRule = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if ((m = line.match(/^\s*(```+|~~~+)\s*([\w+#.-]*)/))) {  // fenced code; an open fence runs to the end
      const fence = m[1], lang = m[2].toLowerCase();
      const code = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence); i++) code.push(lines[i]);
      i++;
      out.push('<pre>' + (lang ? '<span class="lang">' + escapeHtml(lang) + '</span>' : '') + '<code>' +
               highlight(code.join('\n'), lang) + '</code></pre>');
    } else if ((m = line.match(/^\s*(#{1,6})\s+(.*?)\s*#*\s*$/))) {
      const n = m[1].length;
      out.push('<h' + n + '>' + renderInline(m[2]) + '</h' + n + '>');
      i++;
    } else if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      out.push('<hr>');
      i++;
    } else if (/^\s*>/.test(line)) {
      const quoted = [];
      for (; i < lines.length && /^\s*>/.test(lines[i]); i++) quoted.push(lines[i].replace(/^\s*> ?/, ''));
      out.push('<blockquote>' + renderMarkdown(quoted.join('\n')) + '</blockquote>');
    } else if (line.includes('|') && i + 1 < lines.length && tableRule.test(lines[i + 1])) {
      const head = splitRow(line).map(c => '<th>' + renderInline(c) + '</th>').join('');
      let html = '<table><thead><tr>' + head + '</tr></thead><tbody>';
      for (i += 2; i < lines.length && lines[i].includes('|') && !isBlank(lines[i]); i++)
        html += '<tr>' + splitRow(lines[i]).map(c => '<td>' + renderInline(c) + '</td>').join('') + '</tr>';
      out.push(html + '</tbody></table>');
    } else if (listItem.test(line)) {
      // A list: items at this indentation; deeper lines belong to the item above them.
      const indent = line.match(listItem)[1].length;
      const ordered = /\d/.test(line.match(listItem)[2]);
      const items = [];
      while (i < lines.length) {
        const im = lines[i].match(listItem);
        if (im && im[1].length === indent && /\d/.test(im[2]) === ordered) {
          items.push([im[3]]);
          i++;
        } else if (items.length && !isBlank(lines[i]) && (lines[i].match(/^\s*/)[0].length > indent || !im) &&
                   !/^\s*(```|~~~|#)/.test(lines[i])) {
          items[items.length - 1].push(lines[i].replace(new RegExp('^\\s{0,' + (indent + 4) + '}'), ''));
          i++;
        } else if (isBlank(lines[i]) && i + 1 < lines.length && listItem.test(lines[i + 1]) &&
                   lines[i + 1].match(listItem)[1].length >= indent) {
          i++;
        } else {
          break;
        }
      }
      const tag = ordered ? 'ol' : 'ul';
      out.push('<' + tag + '>' + items.map(it => {
        const body = renderMarkdown(it.join('\n'));
        return '<li>' + body.replace(/^<p>([\s\S]*?)<\/p>/, '$1') + '</li>';
      }).join('') + '</' + tag + '>');
    } else if (isBlank(line)) {
      i++;
    } else {
      const para = [];
      for (; i < lines.length && !isBlank(lines[i]) && !/^\s*(```|~~~|#{1,6}\s|>)/.test(lines[i]) &&
             !(para.length && listItem.test(lines[i])); i++) para.push(lines[i]);
      out.push('<p>' + renderInline(para.join('\n')).replace(/\n/g, '<br>') + '</p>');
    }
  }
  return out.join('');
}

// ---- Code highlighting: one scanner for the C-like, Python-like and shell-like languages models write, by a table of
// keywords each. It colours comments, strings, numbers, keywords, types and calls; the text stays escaped.

const KEYWORDS = {
  c: 'auto break case char const continue default do double else enum extern float for goto if inline int long ' +
     'register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while ' +
     'bool true false NULL nullptr class namespace template typename public private protected virtual override ' +
     'new delete this using constexpr noexcept operator try catch throw std',
  js: 'break case catch class const continue debugger default delete do else export extends finally for function if ' +
      'import in instanceof let new return super switch this throw try typeof var void while with yield async await ' +
      'of true false null undefined interface type enum implements readonly',
  py: 'and as assert async await break class continue def del elif else except finally for from global if import in ' +
      'is lambda nonlocal not or pass raise return try while with yield True False None self',
  rust: 'as break const continue crate else enum extern false fn for if impl in let loop match mod move mut pub ref ' +
        'return self Self static struct super trait true type unsafe use where while async await dyn',
  go: 'break case chan const continue default defer else fallthrough for func go goto if import interface map ' +
      'package range return select struct switch type var true false nil',
  java: 'abstract boolean break byte case catch char class const continue default do double else enum extends final ' +
        'finally float for if implements import instanceof int interface long new package private protected public ' +
        'return short static super switch this throw throws try void volatile while true false null var',
  sh: 'if then else elif fi for while until do done case esac function in return local export echo set unset cd',
  sql: 'select from where insert into values update set delete create table drop alter join left right inner outer ' +
       'on group by order having limit and or not null as distinct union primary key',
};
const ALIASES = {
  cpp: 'c', 'c++': 'c', cc: 'c', h: 'c', hpp: 'c', cxx: 'c', cuda: 'c', cu: 'c', javascript: 'js', ts: 'js',
  typescript: 'js', jsx: 'js', tsx: 'js', mjs: 'js', json: 'js', python: 'py', py3: 'py', rs: 'rust', golang: 'go',
  kotlin: 'java', scala: 'java', csharp: 'java', cs: 'java', swift: 'java', bash: 'sh', shell: 'sh', zsh: 'sh',
  console: 'sh', dockerfile: 'sh', makefile: 'sh', cmake: 'sh', yaml: 'sh', yml: 'sh', toml: 'sh', ini: 'sh',
};

function highlight(code, lang) {
  const family = KEYWORDS[lang] ? lang : ALIASES[lang];
  if (!family) return escapeHtml(code);
  const words = new Set(KEYWORDS[family].split(' '));
  const hashComments = family === 'py' || family === 'sh';
  const parts = [
    hashComments ? '#[^\\n]*' : '\\/\\/[^\\n]*|\\/\\*[\\s\\S]*?(?:\\*\\/|$)',
    family === 'sql' ? '--[^\\n]*' : null,
    family === 'py' ? '"""[\\s\\S]*?(?:"""|$)|\'\'\'[\\s\\S]*?(?:\'\'\'|$)' : null,
    '"(?:\\\\.|[^"\\\\\\n])*"?|\'(?:\\\\.|[^\'\\\\\\n])*\'?' +
      (family === 'js' || family === 'go' ? '|`(?:\\\\.|[^`\\\\])*`?' : ''),
    '\\b(?:0[xX][0-9a-fA-F_]+|\\d[\\d_]*(?:\\.\\d+)?(?:[eE][+-]?\\d+)?)[a-zA-Z]*\\b',
    '[A-Za-z_$][\\w$]*',
  ].filter(Boolean);
  const token = new RegExp(parts.join('|'), 'g');
  let out = '', last = 0, m;
  while ((m = token.exec(code))) {
    const t = m[0];
    out += escapeHtml(code.slice(last, m.index));
    last = m.index + t.length;
    let cls = null;
    if (/^(\/\/|\/\*|--)/.test(t) || (hashComments && t[0] === '#')) cls = 'com';
    else if (/^["'`]/.test(t)) cls = 'str';
    else if (/^\d/.test(t)) cls = 'num';
    else if (words.has(family === 'sql' ? t.toLowerCase() : t)) cls = 'kw';
    else if (/^\s*\(/.test(code.slice(last))) cls = 'fn';
    else if (/^[A-Z][a-z0-9]/.test(t) && family !== 'sh') cls = 'ty';
    out += cls ? '<span class="hl-' + cls + '">' + escapeHtml(t) + '</span>' : escapeHtml(t);
  }
  return out + escapeHtml(code.slice(last));
}

// ---- State kept in the browser.

const DEFAULTS = { system: '', temperature: 0.8, top_p: 0.95, top_k: 40, min_p: 0.05, max_tokens: 1024, seed: '',
                   thinking: true, api_key: '' };
const store = {
  load(key, fallback) {
    try { const v = JSON.parse(localStorage.getItem('zinc.' + key)); return v === null ? fallback : v; }
    catch { return fallback; }
  },
  save(key, value) {
    try { localStorage.setItem('zinc.' + key, JSON.stringify(value)); }
    catch (e) { setStatus('cannot keep the conversation in this browser: ' + e.message); }
  },
};

let settings = Object.assign({}, DEFAULTS, store.load('settings', {}));
let conversations = store.load('conversations', []);
let currentId = store.load('current', null);
let running = null;  // the reply being streamed: {controller}

const $ = id => document.getElementById(id);

function setStatus(text) { $('status').textContent = text; }

function current() {
  let c = conversations.find(c => c.id === currentId);
  if (!c) {
    const id = Date.now().toString(36) + Math.random().toString(36).slice(2, 6);
    c = { id, title: 'New conversation', messages: [] };
    conversations.unshift(c);
    currentId = c.id;
  }
  return c;
}

function saveAll() {
  store.save('conversations', conversations);
  store.save('current', currentId);
}

// ---- Drawing.

function statsText(s) {
  if (!s) return '';
  const parts = [];
  if (s.tokens !== undefined) parts.push(s.tokens + ' tokens');
  if (s.tps !== undefined) parts.push(s.tps.toFixed(1) + ' tok/s');
  if (s.ttft !== undefined) parts.push('first token ' + Math.round(s.ttft) + ' ms');
  if (s.finish) parts.push(s.finish === 'length' ? 'cut at the length limit' : s.finish === 'stopped' ? 'stopped' :
                           s.finish === 'tool_calls' ? 'tool calls' : 'done');
  return parts.join(' · ');
}

function drawMessage(m, el) {
  el = el || document.createElement('div');
  el.className = 'message ' + m.role + (m.error ? ' error' : '');
  el.textContent = '';
  if (m.reasoning) {
    const d = document.createElement('details');
    d.className = 'thinking';
    d.open = !!m.streaming && !m.content;
    const s = document.createElement('summary');
    s.textContent = m.streaming && !m.content ? 'Thinking…' : 'Thought';
    const t = document.createElement('div');
    t.className = 'text';
    t.textContent = m.reasoning;
    d.append(s, t);
    el.append(d);
  }
  const content = document.createElement('div');
  content.className = 'content';
  if (m.role === 'assistant' && !m.error) content.innerHTML = renderMarkdown(m.content || '');
  else content.textContent = m.content || '';
  if (m.streaming) content.classList.add('cursor');
  el.append(content);
  for (const call of m.tool_calls || []) {
    const box = document.createElement('div');
    box.className = 'tool-call';
    const name = document.createElement('div');
    name.className = 'name';
    name.textContent = 'Tool call: ' + (call.function.name || '');
    const pre = document.createElement('pre');
    let args = call.function.arguments || '';
    try { args = JSON.stringify(JSON.parse(args), null, 2); } catch { /* still streaming, or not JSON: as it is */ }
    pre.innerHTML = '<code>' + highlight(args, 'json') + '</code>';
    box.append(name, pre);
    el.append(box);
  }
  if (m.stats && !m.streaming) {  // once the reply has ended
    const st = document.createElement('div');
    st.className = 'stats';
    st.textContent = statsText(m.stats);
    el.append(st);
  }
  return el;
}

function drawConversation() {
  const box = $('messages');
  box.textContent = '';
  for (const m of current().messages) box.append(drawMessage(m));
  box.scrollTop = box.scrollHeight;
  drawList();
}

function drawList() {
  const list = $('conversations');
  list.textContent = '';
  for (const c of conversations) {
    const li = document.createElement('li');
    if (c.id === currentId) li.className = 'current';
    const title = document.createElement('span');
    title.textContent = c.title;
    const del = document.createElement('button');
    del.type = 'button';
    del.title = 'Delete';
    del.textContent = '×';
    del.onclick = e => {
      e.stopPropagation();
      if (running) return;
      conversations = conversations.filter(x => x.id !== c.id);
      if (currentId === c.id) currentId = conversations.length ? conversations[0].id : null;
      saveAll();
      drawConversation();
    };
    li.append(title, del);
    li.onclick = () => {
      if (running) return;
      currentId = c.id;
      saveAll();
      drawConversation();
    };
    list.append(li);
  }
}

// ---- Talking to the server.

function headers() {
  const h = { 'Content-Type': 'application/json' };
  if (settings.api_key) h.Authorization = 'Bearer ' + settings.api_key;
  return h;
}

function requestBody(conv) {
  const messages = [];
  if (settings.system) messages.push({ role: 'system', content: settings.system });
  for (const m of conv.messages) {
    if (m.error || m.streaming) continue;
    const msg = { role: m.role, content: m.content || '' };
    if (m.tool_calls && m.tool_calls.length) msg.tool_calls = m.tool_calls;
    messages.push(msg);
  }
  const body = { messages, stream: true, stream_options: { include_usage: true } };
  for (const k of ['temperature', 'top_p', 'top_k', 'min_p', 'max_tokens']) {
    const v = Number(settings[k]);
    if (settings[k] !== '' && Number.isFinite(v)) body[k] = v;
  }
  if (settings.seed !== '' && Number.isFinite(Number(settings.seed))) body.seed = Number(settings.seed);
  if (!settings.thinking) body.chat_template_kwargs = { enable_thinking: false };
  return body;
}

// The events of a server-sent stream, as they arrive.
async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block.split('\n').filter(l => l.startsWith('data:')).map(l => l.slice(5).trimStart()).join('\n');
      if (data) yield data;
    }
  }
}

async function send(text) {
  const conv = current();
  if (!conv.messages.length) conv.title = text.slice(0, 40) || 'New conversation';
  conv.messages.push({ role: 'user', content: text });
  const reply = { role: 'assistant', content: '', reasoning: '', tool_calls: [], streaming: true, stats: {} };
  const body = requestBody(conv);
  conv.messages.push(reply);
  saveAll();
  drawConversation();
  const box = $('messages');
  const el = box.lastChild;
  const controller = new AbortController();
  running = { controller };
  $('send').hidden = true;
  $('stop').hidden = false;
  setStatus('');
  const t0 = performance.now();
  let first = null, last = null, pieces = 0;
  let pending = false;
  const redraw = () => {  // at most once a frame, however fast the tokens come
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      const stick = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
      drawMessage(reply, el);
      if (stick) box.scrollTop = box.scrollHeight;
    });
  };
  try {
    const res = await fetch('/v1/chat/completions', {
      method: 'POST', headers: headers(), body: JSON.stringify(body), signal: controller.signal });
    if (!res.ok) {
      let msg = res.status + ' ' + res.statusText;
      try { msg = (await res.json()).error.message; } catch { /* not an error body */ }
      throw new Error(msg);
    }
    for await (const data of events(res)) {
      if (data === '[DONE]') break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) reply.stats.tokens = chunk.usage.completion_tokens;
      const choice = chunk.choices && chunk.choices[0];
      if (!choice) continue;
      const d = choice.delta || {};
      const now = performance.now();
      if (d.content || d.reasoning_content || d.tool_calls) {
        if (first === null) {
          first = now;
          reply.stats.ttft = first - t0;
        }
        last = now;
        pieces++;
      }
      if (d.reasoning_content) reply.reasoning += d.reasoning_content;
      if (d.content) reply.content += d.content;
      for (const tc of d.tool_calls || []) {
        if (!reply.tool_calls[tc.index])
          reply.tool_calls[tc.index] = { id: tc.id, type: 'function', function: { name: '', arguments: '' } };
        const slot = reply.tool_calls[tc.index];
        if (tc.id) slot.id = tc.id;
        if (tc.function && tc.function.name) slot.function.name += tc.function.name;
        if (tc.function && tc.function.arguments) slot.function.arguments += tc.function.arguments;
      }
      if (choice.finish_reason) reply.stats.finish = choice.finish_reason;
      redraw();
    }
  } catch (e) {
    if (e.name === 'AbortError') {
      reply.stats.finish = 'stopped';
    } else {
      reply.error = true;
      reply.content = (reply.content ? reply.content + '\n\n' : '') + 'Error: ' + e.message;
    }
  }
  // Tokens per second from the first token on; without the usage event (a stopped reply) the pieces are counted.
  if (reply.stats.tokens === undefined && pieces) reply.stats.tokens = pieces;
  if (first !== null && last > first && reply.stats.tokens > 1)
    reply.stats.tps = (reply.stats.tokens - 1) / ((last - first) / 1000);
  reply.tool_calls = reply.tool_calls.filter(Boolean);
  delete reply.streaming;
  running = null;
  $('send').hidden = false;
  $('stop').hidden = true;
  saveAll();
  drawMessage(reply, el);
  box.scrollTop = box.scrollHeight;
}

// ---- Wiring.

function bindSettings() {
  for (const k of Object.keys(DEFAULTS)) {
    const input = $('set-' + k);
    if (input.type === 'checkbox') input.checked = !!settings[k];
    else input.value = settings[k];
    input.oninput = () => {
      settings[k] = input.type === 'checkbox' ? input.checked : input.value;
      store.save('settings', settings);
    };
  }
}

document.addEventListener('DOMContentLoaded', () => {
  bindSettings();
  $('reset-settings').onclick = () => {
    settings = Object.assign({}, DEFAULTS, { api_key: settings.api_key });
    store.save('settings', settings);
    bindSettings();
  };
  $('new-chat').onclick = () => {
    if (running) return;
    currentId = null;
    current();
    saveAll();
    drawConversation();
    $('input').focus();
  };
  $('composer').onsubmit = e => {
    e.preventDefault();
    const text = $('input').value.trim();
    if (!text || running) return;
    $('input').value = '';
    send(text);
  };
  $('input').onkeydown = e => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $('composer').requestSubmit();
    }
  };
  $('stop').onclick = () => { if (running) running.controller.abort(); };
  fetch('/v1/models', { headers: headers() })
    .then(r => r.ok ? r.json() : Promise.reject(new Error(r.status === 401 ? 'an API key is needed (Settings)' :
                                                             'the model is not ready (' + r.status + ')')))
    .then(j => { $('model-name').textContent = j.data[0].id; })
    .catch(e => setStatus(e.message));
  drawConversation();
});
