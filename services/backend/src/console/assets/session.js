// A session: the conversation (timeline.js), the side panels (panels.js), the composer
// (follow-ups queue while a run works; the switch sends one as steering) and the approval
// dialog, which comes back after a reload because pending requests are in the journal.

import { h, append, clear, pretty, diffView, uuid } from './dom.js';
import { Timeline, artifactSource } from './timeline.js';
import { Panels } from './panels.js';

export function sessionPage(main, conn, sessionId) {
  const timeline = new Timeline({ artifactSource: (name) => artifactSource(conn, sessionId, name) });
  const error = h('p', { class: 'error', role: 'alert', id: 'session-error' });
  const report = (text) => { error.textContent = text; };
  const panels = new Panels(conn, sessionId, report);
  const title = h('h1', { id: 'session-title' }, 'Session');
  const status = h('span', { class: 'badge', id: 'session-status' }, '…');
  const interrupt = h('button', { type: 'button', class: 'danger', id: 'interrupt', hidden: true }, 'Interrupt');
  let activeRun = null;
  const pending = new Map(); // request_id -> event

  const prompt = h('textarea', { id: 'prompt', rows: '3', placeholder: 'Ask Lumina… (Ctrl+Enter sends)', 'aria-describedby': 'prompt-help' });
  const steer = h('input', { type: 'checkbox', id: 'steer' });
  const send = h('button', { type: 'submit', id: 'send' }, 'Send');
  const composer = h('form', { class: 'composer', id: 'composer' },
    h('label', { for: 'prompt', class: 'sr-only' }, 'Message'),
    prompt,
    h('div', { class: 'composer-row' },
      h('label', { class: 'inline', id: 'prompt-help' }, steer, ' Steer the running turn (otherwise it queues as a follow-up)'),
      send));
  prompt.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      composer.requestSubmit();
    }
  });
  composer.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const text = prompt.value;
    if (!text.trim()) return;
    const limit = ((conn.hello && conn.hello.server.max_frame_bytes) || 4194304) - 4096;
    const size = new TextEncoder().encode(text).length;
    if (size > limit) {
      report(`This message is ${size} bytes; the backend takes at most ${limit}. Shorten it or attach a file in the project instead.`);
      return;
    }
    report('');
    send.disabled = true;
    try {
      await conn.request('session.submit', {
        session_id: sessionId, idempotency_key: uuid(), prompt: text,
        mode: steer.checked && activeRun ? 'steer' : 'followup',
      });
      prompt.value = '';
      steer.checked = false;
    } catch (e) {
      report('Cannot send: ' + e.message);
    } finally {
      send.disabled = false;
      prompt.focus();
    }
  });
  interrupt.addEventListener('click', () => conn.request('session.interrupt', { session_id: sessionId }).catch((e) => report(e.message)));

  // The approval dialog.
  const dialog = h('dialog', { id: 'permission', 'aria-labelledby': 'permission-title' });
  dialog.addEventListener('cancel', (ev) => ev.preventDefault()); // answer it, not Escape it
  let shown = null;
  let later = null; // a request the user set aside ("Later"): the header button reopens it
  const showApproval = h('button', { type: 'button', class: 'secondary', id: 'show-approval', hidden: true }, 'Approval pending');
  showApproval.addEventListener('click', () => {
    later = null;
    shown = null;
    renderDialog();
  });
  function renderDialog() {
    const next = pending.values().next().value;
    showApproval.hidden = !next || next.request_id !== later;
    if (!next) {
      shown = null;
      if (dialog.open) dialog.close();
      return;
    }
    if (next.request_id === later) {
      if (dialog.open) dialog.close();
      return;
    }
    if (shown === next.request_id && dialog.open) return;
    shown = next.request_id;
    const reason = h('input', { id: 'deny-reason', type: 'text', placeholder: 'optional' });
    const answer = (decision) => async () => {
      const params = { session_id: sessionId, request_id: next.request_id, decision };
      if (decision === 'deny' && reason.value.trim()) params.reason = reason.value.trim();
      try {
        await conn.request('permission.respond', params);
      } catch (e) {
        report('Cannot answer: ' + e.message);
      }
    };
    const preview = next.preview
      ? (/^(---|\+\+\+|@@)/m.test(next.preview) ? diffView(next.preview) : h('pre', { class: 'output' }, next.preview))
      : null;
    append(clear(dialog), [
      h('h2', { id: 'permission-title' }, 'Allow ', h('code', {}, next.tool), '?'),
      h('h3', {}, 'Exact arguments'),
      h('pre', { class: 'json', id: 'permission-args', tabindex: '0' }, pretty(next.arguments)),
      preview ? h('h3', {}, 'Preview') : null, preview,
      h('label', { for: 'deny-reason' }, 'Reason (sent to the model when you deny)'), reason,
      h('div', { class: 'buttons' },
        h('button', { type: 'button', id: 'allow-once', onclick: answer('allow_once') }, 'Allow once'),
        h('button', { type: 'button', id: 'allow-session', class: 'secondary', onclick: answer('allow_session') }, 'Allow this call for the session'),
        h('button', { type: 'button', id: 'deny', class: 'danger', onclick: answer('deny') }, 'Deny'),
        h('button', { type: 'button', id: 'approval-later', class: 'link', onclick: () => { later = next.request_id; renderDialog(); } }, 'Later')),
    ]);
    if (!dialog.open) dialog.showModal();
    dialog.querySelector('#allow-once').focus();
  }

  function setStatus(text) {
    status.textContent = text;
    status.className = 'badge ' + text;
    interrupt.hidden = text !== 'running';
  }

  function onEvent(frame) {
    const e = frame.event;
    if (e.kind === 'permission.requested') pending.set(e.request_id, e);
    if (e.kind === 'permission.resolved') pending.delete(e.request_id);
    if (frame.stream === 'main') {
      if (e.kind === 'run.started') { activeRun = e.run_id; setStatus('running'); }
      if (['run.completed', 'run.failed', 'run.interrupted'].includes(e.kind) && e.run_id === activeRun) {
        activeRun = null;
        setStatus('idle');
      }
      if (e.kind === 'session.archived') setStatus('archived');
      timeline.apply(frame);
    }
    panels.apply(frame);
    queueMicrotask(renderDialog);
  }

  main.append(h('div', { class: 'session-page' },
    h('div', { class: 'session-head' }, h('a', { href: '#/', class: 'back' }, '← Sessions'), title, status, interrupt, showApproval,
      h('a', { href: '#/skills/' + sessionId, id: 'session-skills' }, 'Skills of this project')),
    error,
    h('div', { class: 'session-grid' },
      h('div', { class: 'conversation' }, h('div', { class: 'scroller', tabindex: '0', 'aria-label': 'Conversation' }, timeline.el), composer),
      panels.el),
    dialog));

  conn.subscribe(sessionId, {
    onEvent,
    onDelta: (frame) => timeline.delta(frame),
    onResume: (result) => {
      title.textContent = result.session.title || '(untitled session)';
      document.title = `${title.textContent} · Lumina`;
      setStatus(result.session.status);
      for (const frame of result.pending_permissions || []) {
        if (frame.event && frame.event.kind === 'permission.requested') pending.set(frame.event.request_id, frame.event);
      }
      queueMicrotask(renderDialog);
    },
  }).catch((e) => report(e.code === 'not_found' ? 'No such session.' : 'Cannot open the session: ' + e.message));
  prompt.focus();

  return {
    dispose() {
      conn.unsubscribe();
      if (dialog.open) dialog.close();
    },
  };
}
