// The conversation: user and steering messages, streamed Markdown answers, tool calls
// (input and output collapsed), run boundaries and notices. Main stream only; sub-agents
// appear in the agent tree.

import { h, append, pretty, diffView } from './dom.js';
import { renderMarkdown } from './markdown.js';

export class Timeline {
  // `artifactSource(name)`: a promise of the `src` of one of the session's artifact images.
  constructor({ artifactSource } = {}) {
    this.artifactSource = artifactSource || null;
    this.el = h('ol', { class: 'timeline', id: 'timeline', 'aria-label': 'Conversation', 'aria-live': 'polite' });
    this.streaming = new Map(); // "run:step" -> {el, text, frame}
    this.tools = new Map(); // call_id -> {card, status, body}
  }

  item(cls, ...children) {
    const li = h('li', { class: 'item ' + cls }, ...children);
    this.el.append(li);
    const scroller = this.el.parentElement;
    if (scroller && scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 200) {
      li.scrollIntoView({ block: 'end' });
    }
    return li;
  }

  delta(frame) {
    if (frame.channel !== 'text') return;
    const key = `${frame.run_id}:${frame.step}`;
    let s = this.streaming.get(key);
    if (!s) {
      const body = h('div', { class: 'md streaming' });
      s = { text: '', body, el: this.item('assistant streaming', h('div', { class: 'who' }, 'Lumina'), body), frame: 0 };
      this.streaming.set(key, s);
    }
    s.text += frame.text;
    if (!s.frame) {
      s.frame = requestAnimationFrame(() => {
        s.frame = 0;
        s.body.replaceWith((s.body = renderMarkdown(s.text)));
        s.body.classList.add('streaming');
      });
    }
  }

  apply(frame) {
    const e = frame.event;
    switch (e.kind) {
      case 'session.created':
        this.item('notice', 'Session created in ', h('code', {}, e.project_root));
        break;
      case 'message.user':
        this.item('user', h('div', { class: 'who' }, e.skill ? `You (/${e.skill})` : 'You'), h('div', { class: 'text' }, e.text));
        break;
      case 'message.steering':
        this.item('user steering', h('div', { class: 'who' }, 'You (steering)'), h('div', { class: 'text' }, e.text));
        break;
      case 'run.queued':
        this.item('notice', `Queued (${e.mode}): `, h('span', { class: 'text' }, e.prompt));
        break;
      case 'message.assistant': {
        const key = `${e.run_id}:${e.step}`;
        const s = this.streaming.get(key);
        if (s) {
          if (s.frame) cancelAnimationFrame(s.frame);
          s.el.remove();
          this.streaming.delete(key);
        }
        if (e.text && e.text.trim()) {
          this.item('assistant', h('div', { class: 'who' }, 'Lumina'), renderMarkdown(e.text));
        }
        break;
      }
      case 'tool.started':
        this.toolStarted(e);
        break;
      case 'tool.completed':
        this.toolCompleted(e);
        break;
      case 'step.interrupted': {
        // Deltas are not journaled: the part of the answer that was streamed stays, marked
        // as cut off (a reload shows only the run's end).
        const key = `${e.run_id}:${e.step}`;
        const s = this.streaming.get(key);
        if (s) {
          if (s.frame) cancelAnimationFrame(s.frame);
          s.frame = 0;
          s.body.replaceWith((s.body = renderMarkdown(s.text)));
          s.el.classList.remove('streaming');
          s.el.classList.add('cut');
          s.el.append(h('div', { class: 'cut-note' }, `Answer cut off: ${e.reason}`));
          this.streaming.delete(key);
        }
        break;
      }
      case 'tool.interrupted': {
        const t = this.tools.get(e.call_id);
        if (t) this.setToolStatus(t, 'interrupted', 'interrupted: ' + e.reason);
        break;
      }
      case 'permission.resolved':
        this.item('notice small', `Permission ${e.decision.replace('_', ' ')} (by ${e.by})${e.reason ? ': ' + e.reason : ''}`);
        break;
      case 'run.completed':
        this.item('run-end ok', 'Run completed');
        break;
      case 'run.failed':
        this.item('run-end failed', `Run failed (${e.code}): ${e.message}`);
        break;
      case 'run.interrupted':
        this.item('run-end interrupted', `Run interrupted: ${e.reason}`);
        break;
      case 'warning':
        this.item('notice warning', `Warning (${e.code}): ${e.message}`);
        break;
      case 'mcp.sign_in_required':
        this.item('notice warning', `MCP server ${e.server} needs you to sign in: `, signInLink(e.url));
        break;
      case 'mcp.sign_in_ended':
        this.item('notice small', e.outcome === 'signed_in'
          ? `MCP server ${e.server}: signed in`
          : `MCP server ${e.server}: sign-in ${e.outcome === 'timed_out' ? 'timed out' : 'failed'}; going on without its tools${e.detail ? ' (' + e.detail + ')' : ''}`);
        break;
      case 'checkpoint':
        this.item('notice small', `Context compacted (${e.tokens_before} → ${e.tokens_after} tokens)`);
        break;
      case 'hook.completed':
        this.item('notice small', `Hook ${e.event}: ${e.hook} → exit ${e.exit_code ?? 'killed'}${e.blocked ? ' (blocked)' : ''}`);
        break;
      case 'agent.started':
        this.item('notice', `Sub-agent started: ${e.description || e.prompt.slice(0, 80)}`);
        break;
      case 'goal.started':
        this.item('notice', 'Goal started: ', h('span', { class: 'text' }, e.objective));
        break;
      case 'goal.completed':
        this.item('notice', `Goal ${e.state}${e.summary ? ': ' + e.summary : ''}${e.reason ? ' (' + e.reason + ')' : ''}`);
        break;
      default:
        break; // unknown or bookkeeping kinds
    }
  }

  toolStarted(e) {
    const status = h('span', { class: 'badge running' }, 'running');
    const body = h('div', { class: 'tool-body' },
      h('h4', {}, 'Input'), h('pre', { class: 'json', tabindex: '0' }, pretty(e.arguments)));
    const card = h('details', { class: 'tool', 'data-call': e.call_id },
      h('summary', {}, h('span', { class: 'tool-name' }, e.tool), ' ', status), body);
    const t = { card, status, body };
    this.tools.set(e.call_id, t);
    this.item('tool-item', card);
  }

  setToolStatus(t, cls, text) {
    t.status.className = 'badge ' + cls;
    t.status.textContent = text;
  }

  toolCompleted(e) {
    let t = this.tools.get(e.call_id);
    if (!t) {
      this.toolStarted({ call_id: e.call_id, tool: e.tool, arguments: {} });
      t = this.tools.get(e.call_id);
    }
    this.setToolStatus(t, e.is_error ? 'failed' : 'ok', e.is_error ? 'error' : 'done');
    t.body.append(h('h4', {}, 'Output'), h('pre', { class: 'output', tabindex: '0' }, pretty(e.output)));
    const diff = e.metadata && e.metadata.diff;
    if (diff) t.body.append(h('h4', {}, 'Diff'), diffView(diff));
    const artifact = e.metadata && e.metadata.artifact;
    if (artifact && typeof artifact === 'object') {
      const view = artifactView(artifact, this.artifactSource);
      // A picture is the point of the call: shown without opening the card.
      t.card.after(view);
    }
  }
}

// The authorization URL of an MCP sign-in as a link (http and https only; anything else as
// text).
function signInLink(raw) {
  let url;
  try {
    url = new URL(String(raw));
  } catch {
    return String(raw);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return String(raw);
  return h('a', { href: url.href, rel: 'noopener noreferrer', target: '_blank' }, 'open the sign-in page');
}

const IMAGE_TYPES = new Set(['image/png']);

/**
 * A tool's artifact (`metadata.artifact`, e.g. browser_screenshot's PNG): the image with
 * its alt text, a button that shows it at full size (and back), and the file's path. An
 * image the backend cannot serve here (in the cluster it stays on the instance that took
 * it) leaves the path and says so.
 */
function artifactView(artifact, source) {
  const path = String(artifact.path || '');
  const name = path.split('/').pop();
  const what = artifact.kind === 'screenshot' ? 'Screenshot' : 'Artifact';
  const caption = h('figcaption', { class: 'small muted' }, `${what} saved to `, h('code', {}, path),
    typeof artifact.bytes === 'number' ? ` (${artifact.bytes} bytes)` : '');
  const figure = h('figure', { class: 'artifact' });
  if (!source || !IMAGE_TYPES.has(artifact.media_type) || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) {
    return append(figure, [caption]);
  }
  const page = artifact.title ? `“${artifact.title}”` : '';
  const where = artifact.url ? `${page ? ' ' : ''}(${artifact.url})` : '';
  const alt = page || where ? `${what} of the page ${page}${where}` : `${what} taken by the browser`;
  const img = h('img', { alt, class: 'artifact-image' });
  const toggle = h('button', { type: 'button', class: 'artifact-toggle', 'aria-expanded': 'false', title: 'Show at full size' }, img);
  toggle.addEventListener('click', () => {
    const full = toggle.getAttribute('aria-expanded') !== 'true';
    toggle.setAttribute('aria-expanded', String(full));
    toggle.title = full ? 'Show smaller' : 'Show at full size';
  });
  const missing = h('p', { class: 'small artifact-missing', hidden: true },
    'The image cannot be shown here (in a cluster it is kept on the instance that took it).');
  const unavailable = () => { toggle.hidden = true; missing.hidden = false; };
  img.addEventListener('error', unavailable);
  source(name).then((src) => { img.src = src; }, unavailable);
  return append(figure, [toggle, caption, missing]);
}

/**
 * The `src` of a session's artifact: its URL when the console cookie (or an authenticating
 * proxy) signs the browser's own requests; with a pasted JWT, which only this page holds,
 * fetched with it and turned into a `data:` URL (the CSP's `img-src 'self' data:`).
 */
export async function artifactSource(conn, sessionId, name) {
  const url = `/console/api/sessions/${encodeURIComponent(sessionId)}/artifacts/${encodeURIComponent(name)}`;
  if (!conn.jwt) return url;
  const response = await fetch(url, { headers: { Authorization: 'Bearer ' + conn.jwt }, credentials: 'omit' });
  if (!response.ok) throw new Error(`the backend answered ${response.status}`);
  const blob = await response.blob();
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}
