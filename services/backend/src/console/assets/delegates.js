// Delegated tasks: one card per `a2a_delegate` call (docs/a2a.md#delegation), built from its
// `delegate.updated` events — the agent, the remote task id, the task's state, the latest
// detail and the steps so far (collapsed) — and, once the call returns, the tool result: the
// remote agent's artifacts as text (the events carry only a capped line each).
//
// There is no protocol method to cancel a remote task: interrupting the run that made the
// call stops the call, but the runtime does not send the remote agent `CancelTask`, so the
// card says the remote task may still be running.

import { h, append, clear } from './dom.js';

// A2A task states as people read them.
const STATES = {
  TASK_STATE_SUBMITTED: 'submitted',
  TASK_STATE_WORKING: 'working',
  TASK_STATE_INPUT_REQUIRED: 'input-required',
  TASK_STATE_AUTH_REQUIRED: 'auth-required',
  TASK_STATE_COMPLETED: 'completed',
  TASK_STATE_FAILED: 'failed',
  TASK_STATE_CANCELED: 'canceled',
  TASK_STATE_REJECTED: 'rejected',
  TASK_STATE_UNSPECIFIED: 'unknown',
};
const FINAL = new Set(['completed', 'failed', 'canceled', 'rejected', 'unreachable', 'interrupted']);

const STEPS = {
  card: 'Agent card read',
  sent: 'Message sent',
  status: 'Status',
  artifact: 'Artifact',
  ended: 'Stopped following',
  unreachable: 'Unreachable',
  waiting: 'Waiting for the agent (unreachable; a retry continues)',
};

export function stateName(wire) {
  if (!wire) return null;
  return STATES[wire] || String(wire).replace(/^TASK_STATE_/, '').toLowerCase().replace(/_/g, '-');
}

export class Delegates {
  constructor(conn, sessionId, report) {
    this.conn = conn;
    this.sessionId = sessionId;
    this.report = report;
    this.tasks = new Map(); // call_id -> task
    this.activeRuns = new Set();
    this.list = h('ul', { class: 'delegates', id: 'delegates-list' });
    this.el = h('section', { class: 'panel', id: 'delegates', 'aria-labelledby': 'delegates-title', hidden: true },
      h('h2', { id: 'delegates-title' }, 'Delegated tasks'),
      h('div', { class: 'panel-body' }, this.list));
  }

  /** Takes every event frame of the session, in order. */
  apply(frame) {
    const e = frame.event;
    if (frame.stream === 'main') {
      if (e.kind === 'run.started') this.activeRuns.add(e.run_id);
      if (['run.completed', 'run.failed', 'run.interrupted'].includes(e.kind)) {
        this.activeRuns.delete(e.run_id);
        if (e.kind === 'run.interrupted') this.interrupted((t) => t.run_id === e.run_id);
        else this.refreshButtons();
      }
    }
    switch (e.kind) {
      case 'delegate.updated':
        this.updated(e);
        break;
      case 'tool.completed': {
        const t = this.tasks.get(e.call_id);
        if (t) {
          t.result = { text: String(e.output == null ? '' : e.output), is_error: !!e.is_error };
          const meta = e.metadata || {};
          if (meta.task_id && !t.task_id) t.task_id = meta.task_id;
          if (meta.state) t.state = stateName(meta.state);
          if (meta.unreachable) t.state = 'unreachable';
          if (!meta.state && !FINAL.has(t.state)) {
            // The call ended without the task's end: interrupted (the runtime's result is
            // `interrupted`), or an error before the task went anywhere.
            if (t.result.text === 'interrupted') this.markInterrupted(t);
            else if (t.result.is_error) t.state = 'failed';
          }
          this.render(t);
        }
        break;
      }
      case 'tool.interrupted':
        this.interrupted((t) => t.call_id === e.call_id);
        break;
      default:
        break;
    }
  }

  updated(e) {
    let t = this.tasks.get(e.call_id);
    if (!t) {
      t = { index: this.tasks.size + 1, call_id: e.call_id, run_id: e.run_id, agent: e.agent, task_id: null, state: 'submitted', detail: '', history: [], result: null };
      t.el = h('li', { class: 'delegate', 'data-call': e.call_id });
      this.tasks.set(e.call_id, t);
      this.list.append(t.el);
      this.el.hidden = false;
    }
    if (e.task_id) t.task_id = e.task_id;
    const state = e.step === 'unreachable' ? 'unreachable' : stateName(e.state);
    if (state) t.state = state;
    else if (e.step === 'sent' && t.state === 'submitted') t.state = 'working';
    if (e.detail) t.detail = e.detail;
    t.history.push({ step: e.step, state, detail: e.detail || '' });
    this.render(t);
  }

  /**
   * The run stopped while the call was following the task. The runtime cancels the remote
   * task then and journals how the remote answered (a `canceled` end); without that end (the
   * cancel failed, or the backend stopped first) the remote task may still run.
   */
  interrupted(which) {
    for (const t of this.tasks.values()) {
      // A call that returned (its result is there) no longer followed the task.
      if (which(t) && !t.result && !FINAL.has(t.state)) this.markInterrupted(t);
    }
  }

  markInterrupted(t) {
    t.state = 'interrupted';
    t.detail = 'The run was interrupted; the remote task was not confirmed canceled and may still be running.';
    this.render(t);
  }

  refreshButtons() {
    for (const t of this.tasks.values()) this.render(t);
  }

  render(t) {
    const summaryId = `delegate-${t.index}-title`;
    const old = t.el.querySelector('.delegate-steps');
    const historyOpen = !!(old && old.open);
    const following = !t.result && !FINAL.has(t.state) && this.activeRuns.has(t.run_id);
    const stop = following
      ? h('button', { type: 'button', class: 'danger delegate-stop', title: 'Interrupts the run that is waiting for this task; the remote task is canceled' }, 'Cancel (interrupts the run)')
      : null;
    if (stop) {
      stop.addEventListener('click', async () => {
        try {
          await this.conn.request('session.interrupt', { session_id: this.sessionId, run_id: t.run_id });
        } catch (err) {
          this.report('session.interrupt failed: ' + err.message);
        }
      });
    }
    const steps = h('ol', { class: 'delegate-history' }, t.history.map((s) => h('li', {},
      STEPS[s.step] || s.step, s.state ? [' ', h('span', { class: 'badge ' + s.state }, s.state)] : null,
      s.detail ? [': ', h('span', { class: 'said' }, s.detail)] : null)));
    append(clear(t.el), [
      h('article', { 'aria-labelledby': summaryId },
        h('h3', { id: summaryId, class: 'delegate-head' },
          h('span', { class: 'delegate-agent' }, t.agent), ' ',
          h('span', { class: 'badge delegate-state ' + t.state }, t.state)),
        h('p', { class: 'small muted' }, 'Remote task ', t.task_id ? h('code', { class: 'delegate-task' }, t.task_id) : '(not created yet)'),
        t.detail ? h('p', { class: 'delegate-detail small' }, t.detail) : null,
        h('details', { class: 'delegate-steps', open: historyOpen }, h('summary', {}, `History (${t.history.length})`), steps),
        t.result ? h('details', { class: 'delegate-result', open: true },
          h('summary', {}, t.result.is_error ? 'Result (error)' : 'Result'),
          h('pre', { class: 'output', tabindex: '0', 'aria-label': `Result of the task delegated to ${t.agent}` }, t.result.text)) : null,
        stop ? h('div', { class: 'buttons' }, stop) : null),
    ]);
  }
}
