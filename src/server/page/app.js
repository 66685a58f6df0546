// zinc's chat page: conversations kept in this browser (localStorage), replies streamed from /v1/chat/completions and
// rendered as markdown with highlighted code, reasoning in a collapsible block, tool calls shown, a stop button, and
// time to first token and tok/s under each reply. It reads the server's context and limits from GET /props, counts
// each prompt's tokens (/apply-template, /tokenize) and asks for no more than the context has room for; a
// conversation that outgrows the context can drop its oldest turns. Replies can be regenerated, messages edited and
// resent, replies and code blocks copied. Everything is here: the page loads nothing from elsewhere.
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

// Empty numbers take the server's defaults (GET /props); max_tokens empty: a quarter of the context, as much as fits.
const DEFAULTS = { system: '', temperature: '', top_p: '', top_k: '', min_p: '', max_tokens: '', seed: '',
                   thinking: true, api_key: '', theme: '' };
const SETTING_NAMES = { temperature: 'Temperature', top_p: 'Top-p', top_k: 'Top-k', min_p: 'Min-p',
                        max_tokens: 'Max tokens', max_completion_tokens: 'Max tokens', seed: 'Seed' };
// A reply needs at least this much room in the context (or all it asks for, if less) before it is worth asking.
const MIN_REPLY = 32;

const store = {
  load(key, fallback) {
    try { const v = JSON.parse(localStorage.getItem('zinc.' + key)); return v === null ? fallback : v; }
    catch { return fallback; }
  },
  save(key, value) {
    try { localStorage.setItem('zinc.' + key, JSON.stringify(value)); }
    catch (e) { setStatus('This browser would not keep the conversation (' + e.message + '): it is lost on reload.'); }
  },
};

let settings = Object.assign({}, DEFAULTS, store.load('settings', {}));
// Settings saved before the page read the server's defaults hold its old fixed ones, as numbers (what is typed in is
// a string): those become empty, the server's, and 1,024 tokens no longer outgrow a small context.
for (const [k, v] of Object.entries({ temperature: 0.8, top_p: 0.95, top_k: 40, min_p: 0.05, max_tokens: 1024 }))
  if (settings[k] === v) settings[k] = '';
let conversations = store.load('conversations', []);
let currentId = store.load('current', null);
let running = null;  // the reply being prepared or streamed: {controller}
let editing = -1;    // the index of the user message being edited, in the current conversation
// What GET /props says: the context a request has, the most tokens a reply may have, the sampling defaults.
let props = null;

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

// ---- Errors, in words a user can act on: what happened, the server's own message, and what to do.

class ServerError extends Error {
  constructor(status, message, code, param) {
    super(message || '');
    this.name = 'ServerError';
    this.status = status;
    this.code = code || '';
    this.param = param || '';
  }
}

async function serverError(res) {
  let e = {};
  try { e = (await res.json()).error || {}; } catch { /* not an error body */ }
  return new ServerError(res.status, e.message || res.statusText, e.code, e.param);
}

// {text, action}: action names the button an error's message gets besides Try again (messageActions).
function explain(e) {
  if (e instanceof TypeError)
    return { text: 'The server could not be reached. Check that zinc serve is still running and that this page\'s ' +
                   'address is right, then try again.', action: 'retry' };
  if (!(e instanceof ServerError)) return { text: 'Something went wrong: ' + e.message + '. Try again.', action: 'retry' };
  const said = e.message ? ' The server said: "' + e.message + '".' : '';
  if (e.status === 401)
    return { text: 'This server needs an API key (it was started with --api-key), and ' +
                   (settings.api_key ? 'the one in Settings is not right.' : 'none is set.') +
                   ' Enter it under Settings → API key, then try again.', action: 'api_key' };
  if (e.status === 403) return { text: 'The server refused this page.' + said, action: null };
  if (e.status === 413)
    return { text: 'The conversation is larger than the server accepts.' + said +
                   ' Start a new conversation, or shorten the message.', action: null };
  if (e.status === 503)
    return { text: 'The server is busy, or still loading its model.' + said + ' Wait a few seconds and try again.',
             action: 'retry' };
  if (e.status === 400 && SETTING_NAMES[e.param])
    return { text: 'The server refused the ' + SETTING_NAMES[e.param] + ' setting.' + said + ' Change it in ' +
                   'Settings, or clear it to take the server\'s default, then try again.',
             action: 'setting:' + (e.param === 'max_completion_tokens' ? 'max_tokens' : e.param) };
  if (e.status === 400)
    return { text: 'The server could not take this conversation.' + said, action: 'retry' };
  if (e.status === 0)  // an error event in the stream
    return { text: 'The reply stopped with an error.' + said + ' Try again.', action: 'retry' };
  return { text: 'The server failed (' + e.status + ').' + said + ' Try again; if it goes on failing, look at the ' +
                 'server\'s log.', action: 'retry' };
}

// ---- The notice above the message box: a problem to act on, with its buttons.

function showNotice(text, actions) {
  $('notice-text').textContent = text;
  const box = $('notice-actions');
  box.textContent = '';
  for (const [i, a] of actions.entries()) {
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = a.label;
    if (i === 0) b.className = 'primary';
    b.onclick = a.run;
    box.append(b);
  }
  $('notice').hidden = false;
}

function hideNotice() { $('notice').hidden = true; }

// ---- The menu: the sidebar as a drawer on narrow screens.

const narrow = () => window.matchMedia('(max-width: 700px)').matches;
const menuOpen = () => $('sidebar').classList.contains('open');

function openMenu() {
  $('sidebar').classList.add('open');
  $('backdrop').hidden = false;
  $('menu').setAttribute('aria-expanded', 'true');
  $('main').inert = true;
  $('close-menu').focus();
}

function closeMenu(refocus = true) {
  if (!menuOpen()) return;
  $('sidebar').classList.remove('open');
  $('backdrop').hidden = true;
  $('menu').setAttribute('aria-expanded', 'false');
  $('main').inert = false;
  if (refocus) $('menu').focus();
}

// Opens the settings (and the menu, on a narrow screen) at one field.
function openSetting(name) {
  if (narrow() && !menuOpen()) openMenu();
  $('settings').open = true;
  const field = $('set-' + name);
  field.focus();
  field.scrollIntoView({ block: 'center' });
}

// ---- The server's context and defaults.

function contextText(n) { return n.toLocaleString('en-US') + ' tokens'; }

// The most tokens a reply may ask for: the server's limit, and without a setting a quarter of the context, so that a
// conversation has room for more than one turn.
function replyLimit() {
  const limit = props.n_predict > 0 ? props.n_predict : props.n_ctx;
  const asked = Number(settings.max_tokens);
  if (settings.max_tokens !== '' && Number.isInteger(asked) && asked > 0) return Math.min(asked, limit);
  return Math.min(limit, Math.max(1, Math.floor(props.n_ctx / 4)));
}

async function loadProps() {
  try {
    const res = await fetch('/props', { headers: headers() });
    if (!res.ok) throw await serverError(res);
    const j = await res.json();
    const g = j.default_generation_settings || {};
    const p = g.params || {};
    props = { n_ctx: g.n_ctx, n_predict: p.n_predict, params: p, name: j.model_alias || '' };
    hideNotice();
    $('model-name').textContent = props.name;
    $('top-model').textContent = props.name;
    $('model-context').textContent = 'context ' + contextText(props.n_ctx) + ', replies up to ' +
                                     contextText(props.n_predict > 0 ? props.n_predict : props.n_ctx);
    drawPlaceholders();
    drawContextUse();
  } catch (e) {
    props = null;
    const { text, action } = explain(e);
    showNotice(text, action === 'api_key' ? [{ label: 'Enter the API key', run: () => openSetting('api_key') }]
                                          : [{ label: 'Try again', run: loadProps }]);
  }
}

function drawPlaceholders() {
  if (!props) return;
  const p = props.params;
  for (const k of ['temperature', 'top_p', 'top_k', 'min_p'])
    if (p[k] !== undefined) $('set-' + k).placeholder = 'server default: ' + p[k];
  const limit = props.n_predict > 0 ? props.n_predict : props.n_ctx;
  $('set-max_tokens').max = String(limit);
  $('set-max_tokens').placeholder = 'as many as fit, up to ' + Math.min(limit, Math.max(1, Math.floor(props.n_ctx / 4)));
}

function drawContextUse() {
  const conv = conversations.find(c => c.id === currentId);
  $('context-use').textContent = props && conv && conv.used ?
    'This conversation takes about ' + conv.used + ' of the ' + contextText(props.n_ctx) + ' of the context.' : '';
}

// ---- Drawing.

function statsText(s) {
  if (!s) return '';
  const parts = [];
  if (s.tokens !== undefined) parts.push(s.tokens + ' tokens');
  if (s.tps !== undefined) parts.push(s.tps.toFixed(1) + ' tok/s');
  if (s.ttft !== undefined) parts.push('first token ' + Math.round(s.ttft) + ' ms');
  if (s.finish) parts.push(s.finish === 'length' ? (s.full ? 'cut: the context is full' : 'cut at the length limit') :
                           s.finish === 'stopped' ? 'stopped' : s.finish === 'tool_calls' ? 'tool calls' : 'done');
  return parts.join(' · ');
}

function smallButton(label, aria, run) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'small';
  b.textContent = label;
  if (aria) b.setAttribute('aria-label', aria);
  b.onclick = run;
  return b;
}

// Copies text: the clipboard API where the page is a secure context (localhost), else the older way.
async function copyText(text, button) {
  let ok = false;
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      ok = true;
    }
  } catch { /* refused: the older way */ }
  if (!ok) {
    const area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.style.position = 'fixed';
    area.style.top = '-1000px';
    document.body.append(area);
    area.select();
    try { ok = document.execCommand('copy'); } catch { ok = false; }
    area.remove();
    button.focus();
  }
  const label = button.textContent;
  button.textContent = ok ? 'Copied' : 'Not copied';
  const said = ok ? 'Copied.' : 'The browser did not let the page copy: select the text and copy it by hand.';
  setStatus(said);
  setTimeout(() => {
    button.textContent = label;
    if ($('status').textContent === said) setStatus('');
  }, 2000);
}

// Buttons for each code block: copy its code.
function addCodeButtons(content) {
  for (const pre of content.querySelectorAll('pre')) {
    const code = pre.querySelector('code');
    if (!code) continue;
    const head = document.createElement('div');
    head.className = 'code-head';
    const lang = pre.querySelector(':scope > .lang');
    if (lang) head.append(lang);
    head.append(smallButton('Copy code', 'Copy this code' + (lang ? ' (' + lang.textContent + ')' : ''),
                            e => copyText(code.textContent, e.currentTarget)));
    pre.prepend(head);
  }
}

// A message; with `at` (its index in the current conversation) also its buttons.
function drawMessage(m, el, at) {
  el = el || document.createElement('div');
  el.className = 'message ' + m.role + (m.error ? ' error' : '');
  el.textContent = '';
  if (at !== undefined) el.dataset.at = at;
  if (at !== undefined && at === editing && m.role === 'user') return drawEditor(m, el, at);
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
  else if (m.role === 'assistant' && !m.error) addCodeButtons(content);
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
  if (m.stats && !m.streaming && !m.error) {  // once the reply has ended
    const st = document.createElement('div');
    st.className = 'stats';
    st.textContent = statsText(m.stats);
    el.append(st);
  }
  if (at !== undefined && !m.streaming) el.append(messageActions(m, at));
  return el;
}

function messageActions(m, at) {
  const conv = current();
  const last = at === conv.messages.length - 1;
  const box = document.createElement('div');
  box.className = 'actions';
  if (m.role === 'user') {
    box.append(smallButton('Edit', 'Edit and resend this message', () => startEdit(at)));
  } else if (m.error) {
    if (m.action === 'api_key') box.append(smallButton('Enter the API key', null, () => openSetting('api_key')));
    else if (m.action && m.action.startsWith('setting:'))
      box.append(smallButton('Open the setting', null, () => openSetting(m.action.slice(8))));
    if (last) box.append(smallButton('Try again', 'Try again: ask for this reply again', () => regenerate()));
  } else {
    if (m.content) box.append(smallButton('Copy', 'Copy this reply', e => copyText(m.content, e.currentTarget)));
    if (last) box.append(smallButton('Regenerate', 'Regenerate this reply', () => regenerate()));
  }
  return box;
}

function drawEditor(m, el, at) {
  const form = document.createElement('form');
  form.className = 'edit';
  const area = document.createElement('textarea');
  area.rows = Math.min(10, Math.max(2, m.content.split('\n').length));
  area.value = m.content;
  area.setAttribute('aria-label', 'Edit your message (Enter sends, Escape cancels)');
  const buttons = document.createElement('div');
  buttons.className = 'actions';
  const send = document.createElement('button');
  send.type = 'submit';
  send.className = 'small primary';
  send.textContent = 'Send';
  send.setAttribute('aria-label', 'Send the edited message');
  buttons.append(smallButton('Cancel', 'Cancel the edit', () => cancelEdit()), send);
  form.append(area, buttons);
  form.onsubmit = e => {
    e.preventDefault();
    const text = area.value.trim();
    if (text) resend(at, text);
  };
  area.onkeydown = e => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    } else if (e.key === 'Escape') {
      e.preventDefault();
      e.stopPropagation();
      cancelEdit();
    }
  };
  el.append(form);
  return el;
}

function drawConversation() {
  const box = $('messages');
  box.textContent = '';
  const messages = current().messages;
  const lastDropped = messages.map(m => !!m.excluded).lastIndexOf(true);
  messages.forEach((m, i) => {
    box.append(drawMessage(m, null, i));
    if (i === lastDropped) {
      const note = document.createElement('div');
      note.className = 'dropped-note';
      note.textContent = 'The messages above are no longer sent to the model: the conversation outgrew its context.';
      box.append(note);
    }
  });
  box.scrollTop = box.scrollHeight;
  drawList();
  drawContextUse();
}

function drawList() {
  const list = $('conversations');
  list.textContent = '';
  for (const c of conversations) {
    const li = document.createElement('li');
    const open = document.createElement('button');
    open.type = 'button';
    open.className = 'open';
    open.textContent = c.title;
    if (c.id === currentId) {
      li.className = 'current';
      open.setAttribute('aria-current', 'true');
    }
    open.onclick = () => {
      if (running) return setStatus('Wait for the reply to end, or stop it, before changing conversations.');
      showConversation(c.id);
    };
    const del = document.createElement('button');
    del.type = 'button';
    del.className = 'delete';
    del.setAttribute('aria-label', 'Delete the conversation "' + c.title + '"');
    del.textContent = '×';
    del.onclick = () => {
      if (running) return setStatus('Wait for the reply to end, or stop it, before deleting a conversation.');
      conversations = conversations.filter(x => x.id !== c.id);
      if (currentId === c.id) {
        currentId = conversations.length ? conversations[0].id : null;
        editing = -1;
        hideNotice();
      }
      saveAll();
      drawConversation();
      const first = $('conversations').querySelector('button');
      (first || $('new-chat')).focus();
    };
    li.append(open, del);
    list.append(li);
  }
}

// ---- Talking to the server.

function headers() {
  const h = { 'Content-Type': 'application/json' };
  if (settings.api_key) h.Authorization = 'Bearer ' + settings.api_key;
  return h;
}

async function post(path, body, signal) {
  const res = await fetch(path, { method: 'POST', headers: headers(), body: JSON.stringify(body), signal });
  if (!res.ok) throw await serverError(res);
  return res.json();
}

function requestBody(conv) {
  const messages = [];
  if (settings.system) messages.push({ role: 'system', content: settings.system });
  for (const m of conv.messages) {
    if (m.error || m.streaming || m.excluded) continue;
    const msg = { role: m.role, content: m.content || '' };
    if (m.tool_calls && m.tool_calls.length) msg.tool_calls = m.tool_calls;
    messages.push(msg);
  }
  const body = { messages, stream: true, stream_options: { include_usage: true } };
  for (const k of ['temperature', 'top_p', 'top_k', 'min_p']) {
    const v = Number(settings[k]);
    if (settings[k] !== '' && settings[k] !== null && Number.isFinite(v)) body[k] = v;
  }
  if (settings.seed !== '' && settings.seed !== null && Number.isFinite(Number(settings.seed)))
    body.seed = Number(settings.seed);
  if (!settings.thinking) body.chat_template_kwargs = { enable_thinking: false };
  return body;
}

// The prompt's tokens: the conversation rendered by the server's template (/apply-template), then tokenized as the
// model reads it (/tokenize).
async function countPrompt(body, signal) {
  const req = { messages: body.messages };
  if (body.chat_template_kwargs) req.chat_template_kwargs = body.chat_template_kwargs;
  const { prompt } = await post('/apply-template', req, signal);
  const { tokens } = await post('/tokenize', { content: prompt, add_special: true, parse_special: true }, signal);
  return tokens.length;
}

// The request for the conversation with max_tokens fitted to the context left after its prompt: {body, prompt, room,
// want}, and ok false when too little is left for a reply.
async function fitToContext(conv, signal) {
  const body = requestBody(conv);
  if (!props) {  // the server's limits are not known: it holds the reply to them itself
    if (settings.max_tokens !== '' && Number(settings.max_tokens) > 0) body.max_tokens = Number(settings.max_tokens);
    return { ok: true, body };
  }
  const prompt = await countPrompt(body, signal);
  const room = props.n_ctx - prompt;
  const want = replyLimit();
  if (room < Math.min(want, MIN_REPLY)) return { ok: false, body, prompt, room, want };
  body.max_tokens = Math.min(want, room);
  return { ok: true, body, prompt, room, want, full: body.max_tokens === room };
}

// The turns that may be dropped: each user message but the last that is still sent, with the replies after it.
function droppableTurn(conv) {
  const ms = conv.messages;
  let lastUser = -1;
  ms.forEach((m, i) => { if (m.role === 'user' && !m.excluded) lastUser = i; });
  const first = ms.findIndex(m => m.role === 'user' && !m.excluded);
  if (first < 0 || first >= lastUser) return null;
  let end = first + 1;
  while (end < ms.length && ms[end].role !== 'user') end++;
  return [first, end];
}

function showOutgrown(conv, fit) {
  const ctx = contextText(props.n_ctx);
  const left = fit.room <= 0 ? 'no room' : 'room for only ' + fit.room + ' tokens';
  if (!droppableTurn(conv)) {
    const last = conv.messages.length - 1;
    showNotice('This message is too long for the model: with the conversation\'s template it takes ' + fit.prompt +
               ' tokens, which leaves ' + left + ' of a reply in the ' + ctx + ' of the context. Shorten it, or ' +
               'shorten the system prompt.',
               [{ label: 'Edit the message', run: () => { hideNotice(); startEdit(last); } }]);
  } else {
    showNotice('This conversation no longer fits in the model\'s context: it takes ' + fit.prompt + ' tokens and the ' +
               'context holds ' + ctx + ', which leaves ' + left + ' for a reply. Drop the oldest turns to go on (they ' +
               'stay on screen, but are no longer sent to the model), or start a new conversation.',
               [{ label: 'Drop the oldest turns and continue', run: () => { hideNotice(); generate(conv, true); } },
                { label: 'New conversation', run: () => { hideNotice(); newConversation(); } }]);
  }
  $('notice-actions').querySelector('button').focus();
}

function setRunning(r) {
  running = r;
  $('send').hidden = !!r;
  $('stop').hidden = !r;
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

function send(text) {
  const conv = current();
  if (!conv.messages.some(m => m.role === 'user')) conv.title = text.slice(0, 40) || 'New conversation';
  conv.messages.push({ role: 'user', content: text });
  saveAll();
  drawConversation();
  return generate(conv);
}

// Asks for the reply to the conversation as it is; with `drop`, first drops its oldest turns until a whole reply fits
// (the reply's limit, not only the least one worth asking for), or all but the last message are dropped.
async function generate(conv, drop = false) {
  hideNotice();
  const controller = new AbortController();
  setRunning({ controller });
  setStatus('');
  let fit;
  try {
    for (;;) {
      fit = await fitToContext(conv, controller.signal);
      const turn = drop && fit.room < fit.want ? droppableTurn(conv) : null;
      if (!turn) break;
      for (let i = turn[0]; i < turn[1]; i++) conv.messages[i].excluded = true;
    }
  } catch (e) {
    fit = { error: e };
  }
  saveAll();
  drawConversation();
  if (fit.error && fit.error.name === 'AbortError') {
    setRunning(null);
    return;
  }
  if (!fit.error && !fit.ok) {
    setRunning(null);
    return showOutgrown(conv, fit);
  }
  if (fit.prompt !== undefined) conv.used = fit.prompt;
  drawContextUse();
  const reply = { role: 'assistant', content: '', reasoning: '', tool_calls: [], streaming: true, stats: {} };
  if (fit.full) reply.stats.full = true;
  conv.messages.push(reply);
  const box = $('messages');
  const el = drawMessage(reply);
  box.append(el);
  box.scrollTop = box.scrollHeight;
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
  let outgrown = null;
  try {
    if (fit.error) throw fit.error;
    const res = await fetch('/v1/chat/completions', {
      method: 'POST', headers: headers(), body: JSON.stringify(fit.body), signal: controller.signal });
    if (!res.ok) throw await serverError(res);
    for await (const data of events(res)) {
      if (data === '[DONE]') break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new ServerError(0, chunk.error.message);
      if (chunk.usage) {
        reply.stats.tokens = chunk.usage.completion_tokens;
        conv.used = chunk.usage.prompt_tokens + chunk.usage.completion_tokens;
      }
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
    } else if (e instanceof ServerError && e.code === 'context_length_exceeded' && props) {
      // The count said it fits and the server's own says not (a message that writes a control token's text).
      const m = e.message.match(/has (\d+) tokens/);
      outgrown = { prompt: m ? Number(m[1]) : props.n_ctx, room: 0 };
    } else {
      const { text, action } = explain(e);
      reply.error = true;
      reply.action = action;
      reply.content = (reply.content ? reply.content + '\n\n' : '') + text;
    }
  }
  // Tokens per second from the first token on; without the usage event (a stopped reply) the pieces are counted.
  if (reply.stats.tokens === undefined && pieces) reply.stats.tokens = pieces;
  if (first !== null && last > first && reply.stats.tokens > 1)
    reply.stats.tps = (reply.stats.tokens - 1) / ((last - first) / 1000);
  reply.tool_calls = reply.tool_calls.filter(Boolean);
  delete reply.streaming;
  if (outgrown) conv.messages.pop();
  setRunning(null);
  saveAll();
  if (conv.id === currentId) drawConversation();
  if (outgrown) showOutgrown(conv, outgrown);
}

// ---- Regenerate, edit and resend.

function regenerate() {
  if (running) return;
  const conv = current();
  while (conv.messages.length && conv.messages[conv.messages.length - 1].role === 'assistant') conv.messages.pop();
  if (!conv.messages.length) return;
  generate(conv);
}

function startEdit(at) {
  if (running) return setStatus('Wait for the reply to end, or stop it, before editing.');
  editing = at;
  drawConversation();
  const area = $('messages').querySelector('.edit textarea');
  if (area) {
    area.focus();
    area.setSelectionRange(area.value.length, area.value.length);
    area.scrollIntoView({ block: 'nearest' });
  }
}

function cancelEdit() {
  const at = editing;
  editing = -1;
  drawConversation();
  const button = $('messages').querySelector('[data-at="' + at + '"] .actions button');
  if (button) button.focus();
}

// The message at `at` replaced by `text`, the replies after it dropped, and the conversation asked again.
function resend(at, text) {
  if (running) return;
  const conv = current();
  editing = -1;
  conv.messages.splice(at);
  if (!conv.messages.some(m => m.role === 'user')) conv.title = text.slice(0, 40);
  conv.messages.push({ role: 'user', content: text });
  saveAll();
  drawConversation();
  generate(conv);
  $('input').focus();
}

function newConversation() {
  if (running) return;
  showConversation(null);
}

// Shows conversation `id` (null: a new one), ready for the next message.
function showConversation(id) {
  currentId = id;
  editing = -1;
  hideNotice();
  current();
  saveAll();
  drawConversation();
  if (narrow()) closeMenu(false);
  $('input').focus();
}

// ---- Wiring.

function applyTheme() {
  if (settings.theme) document.documentElement.dataset.theme = settings.theme;
  else delete document.documentElement.dataset.theme;
}

function bindSettings() {
  for (const k of Object.keys(DEFAULTS)) {
    const input = $('set-' + k);
    if (input.type === 'checkbox') input.checked = !!settings[k];
    else input.value = settings[k] === null ? '' : settings[k];
    input.oninput = () => {
      settings[k] = input.type === 'checkbox' ? input.checked : input.value;
      store.save('settings', settings);
      if (k === 'theme') applyTheme();
    };
  }
  // A new key: the server's properties again, with it (Enter or leaving the field).
  $('set-api_key').onchange = () => loadProps();
  applyTheme();
}

document.addEventListener('DOMContentLoaded', () => {
  bindSettings();
  $('reset-settings').onclick = () => {
    settings = Object.assign({}, DEFAULTS, { api_key: settings.api_key });
    store.save('settings', settings);
    bindSettings();
  };
  $('new-chat').onclick = newConversation;
  document.querySelector('.skip').onclick = e => {
    e.preventDefault();
    $('input').focus();
  };
  $('menu').onclick = openMenu;
  $('close-menu').onclick = () => closeMenu();
  $('backdrop').onclick = () => closeMenu();
  window.matchMedia('(max-width: 700px)').addEventListener('change', e => { if (!e.matches) closeMenu(false); });
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
  // Escape closes the menu; else it stops a reply that is being written.
  document.addEventListener('keydown', e => {
    if (e.key !== 'Escape' || e.defaultPrevented) return;
    if (menuOpen()) {
      e.preventDefault();
      closeMenu();
    } else if (running) {
      e.preventDefault();
      running.controller.abort();
    }
  });
  // Tab stays within the open menu (what is behind it is inert).
  $('sidebar').addEventListener('keydown', e => {
    if (e.key !== 'Tab' || !menuOpen()) return;
    const all = [...$('sidebar').querySelectorAll('button, input, textarea, select, summary, a[href]')]
      .filter(x => !x.disabled && x.checkVisibility());  // not those of the closed settings
    if (!all.length) return;
    const first = all[0], last = all[all.length - 1];
    if (e.shiftKey && document.activeElement === first) {
      e.preventDefault();
      last.focus();
    } else if (!e.shiftKey && document.activeElement === last) {
      e.preventDefault();
      first.focus();
    }
  });
  drawConversation();
  loadProps();
});
