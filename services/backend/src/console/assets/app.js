// The console's entry point: sign-in, the connection and the page router
// (#/ sessions, #/session/<id> a session, #/skills[/<session id>] the skills, #/peers the
// A2A peers). See
// docs/console.md.

import { Connection } from './connection.js';
import { h, clear } from './dom.js';
import { sessionsPage } from './sessions.js';
import { sessionPage } from './session.js';
import { skillsPage } from './skills.js';
import { peersPage } from './peers.js';

const main = document.getElementById('main');
const connLabel = document.getElementById('conn');
const signoutButton = document.getElementById('signout');
let conn = null;
let page = null; // {dispose()}

function status(text) {
  connLabel.textContent = text;
  connLabel.dataset.state = text;
  if (text === 'signed-out') signIn('Your console session ended. Sign in again.');
}

function signIn(message) {
  if (page && page.dispose) page.dispose();
  page = null;
  if (conn) conn.close();
  conn = null;
  signoutButton.hidden = true;
  connLabel.textContent = 'signed out';
  clear(main);
  const jwtInput = h('input', { id: 'jwt', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true });
  const error = h('p', { class: 'error', role: 'alert', id: 'signin-error' }, message || '');
  const form = h('form', { class: 'card', id: 'signin-form' },
    h('label', { for: 'jwt' }, 'Cluster backend: paste a JWT (kept in this tab only)'),
    jwtInput,
    h('button', { type: 'submit' }, 'Sign in'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const jwt = jwtInput.value.trim();
    jwtInput.value = '';
    if (!(await connect(jwt))) {
      error.textContent = 'The backend refused this token.';
    }
  });
  main.append(h('section', { class: 'signin', id: 'signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Sign in to Lumina'),
    error,
    h('div', { class: 'card' },
      h('h2', {}, 'Local backend'),
      h('p', {}, 'Run ', h('code', {}, 'lumina --web'), ' in a terminal and open the one-time link it prints. A link works once and for two minutes.')),
    form));
  main.focus();
}

async function connect(jwt) {
  const candidate = new Connection({ jwt, onStatus: status });
  try {
    await candidate.open();
  } catch {
    candidate.close();
    return false;
  }
  conn = candidate;
  signoutButton.hidden = false;
  route();
  return true;
}

function route() {
  if (!conn) return;
  if (page && page.dispose) page.dispose();
  clear(main);
  const hash = location.hash || '#/';
  const m = hash.match(/^#\/session\/([\w-]+)$/);
  const skills = hash.match(/^#\/skills(?:\/([\w-]+))?$/);
  if (m) page = sessionPage(main, conn, m[1]);
  else if (skills) page = skillsPage(main, conn, skills[1] || null);
  else if (hash === '#/peers') page = peersPage(main, conn);
  else page = sessionsPage(main, conn);
}

signoutButton.addEventListener('click', async () => {
  try {
    await fetch('/console/logout', { method: 'POST', credentials: 'same-origin' });
  } catch {
    // signed out locally either way
  }
  signIn('Signed out.');
});

window.addEventListener('hashchange', route);

async function boot() {
  const params = new URLSearchParams(location.search);
  const refused = params.get('signin') === 'refused';
  if (location.search) history.replaceState(null, '', location.pathname + location.hash);
  if (refused) {
    signIn('This sign-in link was already used or has expired. Run lumina --web for a new one.');
    return;
  }
  if (!(await connect(null))) signIn('');
}

boot();
