// The session's side panels: goal (started with optional budgets; its state, usage against
// the budgets, pause/resume/cancel), queued follow-ups
// (each can be turned into steering), the agent tree, recalled memory, changed files (only
// when a tool changed one), MCP servers, entering and leaving a team (teampicker.js), the
// team chat (team.js, only in a team) and delegated A2A tasks (delegates.js, only once the
// session delegated one). Extension point: a panel is a section fed the session's events —
// the sandbox badge plugs in the same way.

import { h, append, clear, diffView, uuid } from './dom.js';
import { TeamChat } from './team.js';
import { TeamPicker } from './teampicker.js';
import { Delegates } from './delegates.js';

// The budgets `goal.start` takes; time is asked in minutes and sent in milliseconds.
const BUDGETS = [
  { key: 'max_turns', label: 'Max turns', scale: 1, max: 4294967295 },
  { key: 'max_tool_calls', label: 'Max tool calls', scale: 1, max: 4294967295 },
  { key: 'max_tokens', label: 'Max tokens', scale: 1, max: Number.MAX_SAFE_INTEGER },
  { key: 'max_wall_ms', label: 'Minutes', scale: 60000, max: 1000000 },
];

/** Milliseconds for people: seconds under a minute, minutes above. */
function duration(ms) {
  return ms < 60000 ? `${(ms / 1000).toFixed(1)} s` : `${+(ms / 60000).toFixed(1)} min`;
}

function section(id, title) {
  const body = h('div', { class: 'panel-body' });
  const el = h('section', { class: 'panel', id, 'aria-labelledby': id + '-title' }, h('h2', { id: id + '-title' }, title), body);
  return { el, body };
}

export class Panels {
  constructor(conn, sessionId, report) {
    this.conn = conn;
    this.sessionId = sessionId;
    this.report = report;
    this.goal = null;
    this.queued = new Map(); // run_id -> prompt
    this.agents = new Map(); // child_id -> {description, depth, status, parent}
    this.memory = []; // {run_id, source_ids}
    this.diffs = []; // {call_id, tool, path, diff}
    this.paths = new Map(); // call_id -> the path argument of a running tool call
    this.el = h('aside', { class: 'panels', 'aria-label': 'Session details' });
    this.goalPanel = section('goal', 'Goal');
    this.queuePanel = section('queue', 'Queued follow-ups');
    this.agentPanel = section('agents', 'Agent tree');
    this.memoryPanel = section('memory', 'Recalled memory');
    this.changesPanel = section('changes', 'Changed files');
    this.mcpPanel = section('mcp', 'MCP servers');
    this.team = new TeamChat();
    this.teamPicker = new TeamPicker(conn, sessionId);
    this.delegates = new Delegates(conn, sessionId, report);
    for (const p of [this.teamPicker, this.team, this.delegates, this.changesPanel, this.goalPanel, this.queuePanel, this.agentPanel, this.memoryPanel, this.mcpPanel]) {
      this.el.append(p.el);
    }
    this.dirty = false;
    this.render();
    this.loadMcp();
  }

  apply(frame) {
    const e = frame.event;
    this.team.apply(frame);
    this.teamPicker.apply(frame);
    this.delegates.apply(frame);
    switch (e.kind) {
      case 'goal.started':
        this.goal = { goal_id: e.goal_id, objective: e.objective, acceptance_criteria: e.acceptance_criteria, budgets: e.budgets, state: 'running', usage: { turns: 0, tool_calls: 0, tokens: 0, wall_ms: 0 } };
        break;
      case 'goal.updated':
      case 'goal.completed':
        if (this.goal && this.goal.goal_id === e.goal_id) {
          Object.assign(this.goal, { state: e.state, usage: e.usage || this.goal.usage, reason: e.reason, summary: e.summary });
        }
        break;
      case 'run.queued':
        this.queued.set(e.run_id, e.prompt);
        break;
      case 'run.started':
      case 'run.interrupted':
        if (frame.stream === 'main') this.queued.delete(e.run_id);
        break;
      case 'agent.started':
        this.agents.set(e.child_id, { description: e.description || e.prompt, depth: e.depth, status: 'running', parent: e.parent_run_id });
        break;
      case 'agent.completed': {
        const a = this.agents.get(e.child_id);
        if (a) a.status = e.is_error ? 'failed' : 'completed';
        break;
      }
      case 'agent.interrupted': {
        const a = this.agents.get(e.child_id);
        if (a) a.status = 'interrupted';
        break;
      }
      case 'memory.recalled':
        this.memory.push({ run_id: e.run_id, source_ids: e.source_ids || [] });
        break;
      case 'tool.started':
        if (e.arguments && typeof e.arguments.path === 'string') this.paths.set(e.call_id, e.arguments.path);
        return;
      case 'tool.completed':
        if (e.metadata && e.metadata.diff) {
          this.diffs.push({ call_id: e.call_id, tool: e.tool, path: this.paths.get(e.call_id), diff: e.metadata.diff });
        }
        this.paths.delete(e.call_id);
        break;
      default:
        return;
    }
    this.schedule();
  }

  schedule() {
    if (this.dirty) return;
    this.dirty = true;
    queueMicrotask(() => {
      this.dirty = false;
      this.render();
    });
  }

  async act(method, params) {
    try {
      return await this.conn.request(method, { session_id: this.sessionId, ...params });
    } catch (e) {
      this.report(`${method} failed: ${e.message}`);
      return null;
    }
  }

  render() {
    this.renderGoal();
    this.renderQueue();
    this.renderAgents();
    this.renderMemory();
    this.renderChanges();
  }

  renderGoal() {
    const b = this.goalPanel.body;
    const g = this.goal;
    if (!g) {
      // Built once, so what was typed survives the renders other events cause.
      if (!this.goalForm) this.goalForm = this.buildGoalForm();
      if (this.goalForm.parentNode !== b) {
        clear(b).append(h('p', { class: 'muted' }, 'No goal in this session.'), this.goalForm);
      }
      return;
    }
    clear(b);
    const final = ['success', 'budget-exhausted', 'failed', 'cancelled'].includes(g.state);
    const budgets = g.budgets || {};
    const u = g.usage || {};
    const row = (key, label, used, max, show = String) => h('tr', { 'data-budget': key },
      h('th', { scope: 'row' }, label),
      h('td', {}, max ? `${show(used || 0)} / ${show(max)}` : show(used || 0)));
    append(b, [
      h('p', {}, h('span', { class: 'badge ' + g.state, id: 'goal-state' }, g.state), ' ', g.objective),
      g.reason ? h('p', { class: 'muted small', id: 'goal-reason' }, g.reason) : null,
      g.summary ? h('p', { class: 'small' }, g.summary) : null,
      h('table', { class: 'budgets', id: 'goal-budgets' },
        h('caption', { class: 'sr-only' }, 'Usage against the budgets'),
        h('tbody', {},
          row('max_turns', 'turns', u.turns, budgets.max_turns),
          row('max_tool_calls', 'tool calls', u.tool_calls, budgets.max_tool_calls),
          row('max_tokens', 'tokens', u.tokens, budgets.max_tokens),
          row('max_wall_ms', 'time', u.wall_ms, budgets.max_wall_ms, duration))),
    ]);
    if (!final) {
      const pause = h('button', { type: 'button', class: 'secondary', disabled: g.state === 'paused' }, 'Pause');
      const resume = h('button', { type: 'button', class: 'secondary', disabled: g.state !== 'paused' }, 'Resume');
      const cancel = h('button', { type: 'button', class: 'danger' }, 'Cancel goal');
      pause.addEventListener('click', () => this.act('goal.pause', { goal_id: g.goal_id }));
      resume.addEventListener('click', () => this.act('goal.resume', { goal_id: g.goal_id }));
      cancel.addEventListener('click', () => this.act('goal.cancel', { goal_id: g.goal_id }));
      b.append(h('div', { class: 'buttons' }, pause, resume, cancel));
    }
  }

  /** The form that starts a goal: objective and optional budgets, checked here first. */
  buildGoalForm() {
    const objective = h('input', { id: 'goal-objective', type: 'text', required: true });
    const error = h('p', { class: 'error', role: 'alert', id: 'goal-error' });
    const fields = BUDGETS.map((f) => ({
      ...f,
      input: h('input', { id: 'goal-' + f.key, type: 'number', min: '1', step: 'any', inputmode: 'numeric', 'aria-describedby': 'goal-budget-help' }),
    }));
    const form = h('form', { class: 'goal-form', id: 'goal-form', novalidate: true },
      h('label', { for: 'goal-objective' }, 'Objective'), objective,
      h('fieldset', { class: 'goal-budgets' },
        h('legend', {}, 'Budgets (optional)'),
        h('p', { class: 'muted small', id: 'goal-budget-help' }, 'Whole numbers from 1; empty means no limit. The goal stops when one is spent.'),
        h('div', { class: 'budget-grid' }, fields.map((f) => h('div', { class: 'budget-field' }, h('label', { for: f.input.id }, f.label), f.input)))),
      error,
      h('button', { type: 'submit', class: 'secondary', id: 'goal-start' }, 'Start goal'));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      error.textContent = '';
      const budgets = {};
      for (const f of fields) {
        f.input.removeAttribute('aria-invalid');
        const text = f.input.value.trim();
        if (!text && !f.input.validity.badInput) continue;
        const n = Number(text);
        if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < 1 || n > f.max) {
          f.input.setAttribute('aria-invalid', 'true');
          error.textContent = `${f.label}: enter a whole number from 1 to ${f.max}, or leave it empty.`;
          f.input.focus();
          return;
        }
        budgets[f.key] = n * f.scale;
      }
      if (!objective.value.trim()) {
        error.textContent = 'Enter the objective.';
        objective.focus();
        return;
      }
      const params = { idempotency_key: uuid(), objective: objective.value.trim() };
      if (Object.keys(budgets).length) params.budgets = budgets;
      try {
        await this.conn.request('goal.start', { session_id: this.sessionId, ...params });
        objective.value = '';
        for (const f of fields) f.input.value = '';
      } catch (e) {
        error.textContent = 'Cannot start the goal: ' + e.message;
      }
    });
    return form;
  }

  renderQueue() {
    const b = clear(this.queuePanel.body);
    if (this.queued.size === 0) {
      b.append(h('p', { class: 'muted' }, 'Nothing queued. Messages sent while a run works wait here.'));
      return;
    }
    const list = h('ul', { class: 'queue' });
    for (const [runId, prompt] of this.queued) {
      const steer = h('button', { type: 'button', class: 'secondary', title: 'Send it to the running turn now instead' }, 'Make steering');
      steer.addEventListener('click', async () => {
        // A queued follow-up becomes steering: cancel it before it starts, then steer with
        // its text (the protocol's two documented operations).
        const r = await this.act('session.interrupt', { run_id: runId });
        if (r && r.interrupted) await this.act('session.submit', { idempotency_key: uuid(), prompt, mode: 'steer' });
      });
      const drop = h('button', { type: 'button', class: 'link' }, 'Cancel');
      drop.addEventListener('click', () => this.act('session.interrupt', { run_id: runId }));
      list.append(h('li', {}, h('span', { class: 'text' }, prompt), h('div', { class: 'buttons' }, steer, drop)));
    }
    b.append(list);
  }

  renderAgents() {
    const b = clear(this.agentPanel.body);
    if (this.agents.size === 0) {
      b.append(h('p', { class: 'muted' }, 'No sub-agents.'));
      return;
    }
    const list = h('ul', { class: 'tree' });
    for (const [id, a] of this.agents) {
      list.append(h('li', { class: 'depth-' + a.depth, 'data-agent': id },
        h('span', { class: 'badge ' + a.status }, a.status), ' ', a.description.slice(0, 120)));
    }
    b.append(list);
  }

  renderMemory() {
    const b = clear(this.memoryPanel.body);
    const ids = this.memory.flatMap((m) => m.source_ids);
    if (ids.length === 0) {
      b.append(h('p', { class: 'muted' }, 'No earlier evidence recalled.'));
      return;
    }
    b.append(h('ul', { class: 'sources' }, ids.map((id) => h('li', {}, h('code', {}, id)))));
  }

  renderChanges() {
    // Shown only when files changed.
    this.changesPanel.el.hidden = this.diffs.length === 0;
    const b = clear(this.changesPanel.body);
    for (const d of this.diffs) {
      b.append(h('details', { class: 'change', open: true }, h('summary', {}, d.path ? h('code', {}, d.path) : null, ' ', h('span', { class: 'muted small' }, d.tool)), diffView(d.diff)));
    }
  }

  async loadMcp() {
    const b = this.mcpPanel.body;
    let result;
    try {
      result = await this.conn.request('mcp.status', { session_id: this.sessionId });
    } catch (e) {
      clear(b).append(h('p', { class: 'muted' }, 'MCP status unavailable: ' + e.message));
      return;
    }
    clear(b);
    if (!result.servers.length) {
      b.append(h('p', { class: 'muted' }, 'No MCP servers configured.'));
      return;
    }
    for (const s of result.servers) {
      const trust = s.state === 'untrusted' && s.source === 'project'
        ? h('button', { type: 'button', class: 'secondary', onclick: async () => { await this.act('mcp.trust', { server: s.name }); this.loadMcp(); } }, 'Trust')
        : null;
      append(b, [h('details', { class: 'mcp' },
        h('summary', {}, s.name, ' ', h('span', { class: 'badge ' + s.state }, s.state), ` ${s.source} · ${s.transport}`),
        s.detail ? h('p', { class: 'muted small' }, s.detail) : null,
        h('ul', {}, s.tools.map((t) => h('li', {}, h('code', {}, t)))),
        trust)]);
    }
  }
}
