// The sessions page: list (with archived ones on request), new, open (resume), archive.

import { h, clear, time } from './dom.js';

export function sessionsPage(main, conn) {
  let showArchived = false;
  const list = h('div', { id: 'sessions', 'aria-live': 'polite' });
  const error = h('p', { class: 'error', role: 'alert' });
  const title = h('input', { id: 'new-title', type: 'text', placeholder: 'optional' });
  const root = h('input', { id: 'new-root', type: 'text', placeholder: 'the backend\'s default' });
  const form = h('form', { class: 'card new-session', id: 'new-session' },
    h('h2', {}, 'New session'),
    h('label', { for: 'new-title' }, 'Title'), title,
    h('label', { for: 'new-root' }, 'Project directory'), root,
    h('button', { type: 'submit', id: 'create' }, 'Create session'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const params = {};
      if (title.value.trim()) params.title = title.value.trim();
      if (root.value.trim()) params.project_root = root.value.trim();
      const { session } = await conn.request('session.create', params);
      location.hash = '#/session/' + session.id;
    } catch (e) {
      error.textContent = 'Cannot create the session: ' + e.message;
    }
  });
  const toggle = h('input', { type: 'checkbox', id: 'show-archived' });
  toggle.addEventListener('change', () => {
    showArchived = toggle.checked;
    load();
  });

  main.append(h('section', { class: 'sessions-page', 'aria-labelledby': 'sessions-title' },
    h('div', { class: 'page-head' },
      h('h1', { id: 'sessions-title' }, 'Sessions'),
      h('label', { class: 'inline' }, toggle, ' show archived')),
    error, form, list));

  async function load() {
    try {
      const { sessions } = await conn.request('session.list', { include_archived: showArchived });
      render(sessions);
    } catch (e) {
      error.textContent = 'Cannot list sessions: ' + e.message;
    }
  }

  function render(sessions) {
    clear(list);
    if (sessions.length === 0) {
      list.append(h('p', { class: 'muted' }, 'No sessions yet.'));
      return;
    }
    const table = h('table', { class: 'sessions' },
      h('caption', { class: 'sr-only' }, 'Sessions, newest first'),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Title'), h('th', { scope: 'col' }, 'Status'),
        h('th', { scope: 'col' }, 'Updated'), h('th', { scope: 'col' }, 'Actions'))));
    const body = h('tbody');
    for (const s of sessions) {
      const archive = h('button', { type: 'button', class: 'secondary', disabled: s.status !== 'idle' }, 'Archive');
      archive.addEventListener('click', async () => {
        try {
          await conn.request('session.archive', { session_id: s.id });
          load();
        } catch (e) {
          error.textContent = 'Cannot archive: ' + e.message;
        }
      });
      body.append(h('tr', { 'data-session': s.id },
        h('td', {}, h('a', { href: '#/session/' + s.id }, s.title || '(untitled)'),
          h('div', { class: 'muted small' }, s.project_root)),
        h('td', {}, h('span', { class: 'badge ' + s.status }, s.status)),
        h('td', {}, time(s.updated_at_ms)),
        h('td', {}, archive)));
    }
    table.append(body);
    list.append(table);
  }

  load();
  return { dispose() {} };
}
