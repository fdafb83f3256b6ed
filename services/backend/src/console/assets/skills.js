// The skills page (#/skills, #/skills/<session id>): what a prompt can invoke as /name —
// `skill.list` over the same WebSocket. With a session its project's skills are listed too.

import { h, clear } from './dom.js';

const SOURCES = {
  project: 'project skills/',
  'project-private': 'project .Lumina/PROJECT_SKILLS/',
  user: 'your config/skills/',
  builtin: 'built-in',
};

export function skillsPage(main, conn, sessionId) {
  const list = h('div', { id: 'skills', 'aria-live': 'polite' });
  const error = h('p', { class: 'error', role: 'alert', id: 'skills-error' });
  const problems = h('div', { id: 'skills-problems' });
  const picker = h('select', { id: 'skills-session' },
    h('option', { value: '' }, 'No project: your skills and the built-in ones'));
  picker.addEventListener('change', () => {
    location.hash = picker.value ? '#/skills/' + picker.value : '#/skills';
  });

  main.append(h('section', { class: 'skills-page', 'aria-labelledby': 'skills-title' },
    h('div', { class: 'page-head' }, h('h1', { id: 'skills-title' }, 'Skills')),
    h('p', { class: 'muted' }, 'A message that starts with ', h('code', {}, '/name'),
      ' runs the skill of that name with the rest of the message as its arguments.'),
    h('div', { class: 'card skills-scope' },
      h('label', { for: 'skills-session' }, 'Include the project of a session'), picker),
    error, list, problems));

  async function loadSessions() {
    try {
      const { sessions } = await conn.request('session.list', {});
      for (const s of sessions) {
        picker.append(h('option', { value: s.id, selected: s.id === sessionId },
          `${s.title || '(untitled)'} — ${s.project_root}`));
      }
      if (sessionId && !sessions.some((s) => s.id === sessionId)) {
        picker.append(h('option', { value: sessionId, selected: true }, sessionId));
      }
    } catch (e) {
      error.textContent = 'Cannot list sessions: ' + e.message;
    }
  }

  async function load() {
    let result;
    try {
      result = await conn.request('skill.list', sessionId ? { session_id: sessionId } : {});
    } catch (e) {
      error.textContent = e.code === 'not_found' ? 'No such session.' : 'Cannot list skills: ' + e.message;
      return;
    }
    render(result.skills, result.errors || []);
  }

  function render(skills, errors) {
    clear(list);
    if (skills.length === 0) {
      list.append(h('p', { class: 'muted' }, 'No skills found. A skill is a folder with a SKILL.md.'));
    } else {
      const body = h('tbody');
      for (const s of skills) {
        body.append(h('tr', { 'data-skill': s.name },
          h('td', {}, h('code', {}, '/' + s.name)),
          h('td', {}, s.description || h('span', { class: 'muted' }, 'no description')),
          h('td', {}, h('span', { class: 'badge source-' + s.source }, SOURCES[s.source] || s.source),
            s.shadows ? h('div', { class: 'muted small' }, `hides ${s.shadows} of the same name`) : null)));
      }
      list.append(h('table', { class: 'sessions skills' },
        h('caption', { class: 'sr-only' }, 'Skills, by name'),
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Description'),
          h('th', { scope: 'col' }, 'Source'))),
        body));
    }
    clear(problems);
    if (errors.length) {
      problems.append(h('h2', {}, 'Skipped'),
        h('ul', { class: 'small' }, errors.map((text) => h('li', {}, text))));
    }
  }

  loadSessions();
  load();
  return { dispose() {} };
}
