// Entering and leaving a team from a session (docs/teams.md): the teams `team.list` finds
// for the session's project — a radio each, broken ones listed with their error and not
// selectable — *Enter team* (`team.enter`) and, while the session is in one, *Leave team*
// (`team.exit`). Whether the session is in a team comes from its events
// (`team.entered` / `team.exited` on `main`), so a reload or another tab agrees.

import { h, append, clear } from './dom.js';

export class TeamPicker {
  constructor(conn, sessionId) {
    this.conn = conn;
    this.sessionId = sessionId;
    this.current = null; // {team_run_id, team, display_name} while in a team
    this.teams = null; // the last team.list answer
    this.loadError = '';
    this.busy = false;
    this.chosen = null; // the team the user picked, kept across renders
    this.error = h('p', { class: 'error', role: 'alert', id: 'team-picker-error' });
    this.body = h('div', { class: 'panel-body' });
    this.el = h('section', { class: 'panel team-picker', id: 'team-picker', 'aria-labelledby': 'team-picker-title' },
      h('h2', { id: 'team-picker-title' }, 'Agent team'), this.body, this.error);
    this.render();
    this.load();
  }

  /** Takes every event frame of the session; only the main stream's team.entered/exited count. */
  apply(frame) {
    if (frame.stream !== 'main') return;
    const e = frame.event;
    if (e.kind === 'team.entered') {
      this.current = { team_run_id: e.team_run_id, team: e.team, display_name: e.display_name || e.team };
      this.render();
    } else if (e.kind === 'team.exited' && this.current && this.current.team_run_id === e.team_run_id) {
      this.current = null;
      this.render();
    }
  }

  async load() {
    try {
      const result = await this.conn.request('team.list', { session_id: this.sessionId });
      this.teams = result.teams || [];
      this.loadError = '';
    } catch (e) {
      this.teams = null;
      this.loadError = 'Cannot list the teams: ' + e.message;
    }
    this.render();
  }

  async act(method, params) {
    if (this.busy) return null; // one request at a time: a second press does nothing
    this.error.textContent = '';
    this.busy = true;
    try {
      return await this.conn.request(method, { session_id: this.sessionId, ...params });
    } catch (e) {
      const why = e.code === 'conflict' ? ' (the session is busy or already in a team)' : '';
      this.error.textContent = `${method} failed: ${e.message}${why}`;
      return null;
    } finally {
      this.busy = false;
    }
  }

  /** Redraws the panel; focus inside it moves to the new main control (Leave / Enter). */
  render() {
    const hadFocus = this.body.contains(document.activeElement);
    this.draw();
    if (hadFocus) {
      const next = this.body.querySelector('#team-leave, #team-enter, #team-refresh');
      if (next) next.focus();
    }
  }

  draw() {
    const b = clear(this.body);
    if (this.current) {
      const leave = h('button', { type: 'button', class: 'secondary', id: 'team-leave' }, 'Leave team');
      leave.addEventListener('click', async () => {
        const r = await this.act('team.exit', {});
        if (r) this.load();
      });
      append(b, [
        h('p', { id: 'team-current' }, 'This session works as the team ', h('strong', {}, this.current.display_name),
          ' ', h('span', { class: 'muted small' }, `(${this.current.team})`), '.'),
        h('div', { class: 'buttons' }, leave),
      ]);
      return;
    }
    if (this.teams === null) {
      b.append(h('p', { class: 'muted' }, this.loadError || 'Loading the teams…'));
      if (this.loadError) b.append(this.refreshButton());
      return;
    }
    if (this.teams.length === 0) {
      b.append(h('p', { class: 'muted' }, 'No teams: add one in the project’s .Lumina/TEAM/ or with /NewTeam.'), this.refreshButton());
      return;
    }
    const options = this.teams.map((t) => {
      const id = 'team-option-' + t.name;
      const broken = typeof t.error === 'string' && t.error !== '';
      const errorId = id + '-error';
      const input = h('input', {
        type: 'radio', name: 'team-choice', id, value: t.name, disabled: broken,
        'aria-describedby': broken ? errorId : null, checked: !broken && this.chosen === t.name,
      });
      input.addEventListener('change', () => { if (input.checked) this.chosen = t.name; });
      // The headline and the first issue; every issue under "All issues" when there are more.
      const lines = broken ? t.error.split('\n') : [];
      const first = lines.slice(0, 2).join('\n');
      const more = lines.length > 2 ? t.error : '';
      return h('li', { class: 'team-option' + (broken ? ' broken' : ''), 'data-team': t.name },
        input,
        h('label', { for: id }, h('span', { class: 'team-display' }, t.display_name || t.name), ' ',
          h('span', { class: 'muted small' }, `${t.name} · ${t.source}`)),
        broken ? h('p', { class: 'team-broken small', id: errorId }, h('strong', {}, 'Broken: '), first) : null,
        more ? h('details', { class: 'team-issues' }, h('summary', {}, 'All issues'), h('pre', { class: 'output', tabindex: '0' }, more)) : null);
    });
    const enter = h('button', { type: 'submit', id: 'team-enter' }, 'Enter team');
    const form = h('form', { id: 'team-form', class: 'team-form' },
      h('fieldset', {},
        h('legend', {}, 'Work on this session as a team'),
        h('ul', { class: 'team-options' }, options)),
      h('div', { class: 'buttons' }, enter, this.refreshButton()));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const chosen = form.querySelector('input[name="team-choice"]:checked');
      if (!chosen) {
        this.error.textContent = 'Choose a team first.';
        return;
      }
      await this.act('team.enter', { team: chosen.value });
    });
    b.append(form);
  }

  refreshButton() {
    const refresh = h('button', { type: 'button', class: 'link', id: 'team-refresh' }, 'Refresh the list');
    refresh.addEventListener('click', () => this.load());
    return refresh;
  }
}
