// Delegated tasks: one card per `a2a_delegate` call (docs/a2a.md#delegation), built from its
// `delegate.updated` events — the agent, the remote task id, the task's state, the latest
// detail and the steps so far (collapsed) — and, once the call returns, the tool result: the
// remote agent's artifacts as text (the events carry only a capped line each).
//
// *Cancel* interrupts the run that made the call (`session.interrupt`); the interrupted call
// sends the remote agent `CancelTask` and journals its answer. A call parked while its agent
// is unreachable (latest step `waiting`, not ended: docs/a2a.md#a-delegation-parked-while-
// its-agent-is-down) shows `waiting` and offers *Retry* (`delegate.retry`); the answer —
// still unreachable, following the task again, ended — is announced in the card's status.

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

// Steps after which a parked call follows its task again (a retry's card read and a failed
// attempt leave it parked).
const PROGRESS = new Set(['sent', 'status', 'artifact', 'ended']);

/** What a `delegate.retry` answer means, in words. */
export function retryOutcome(agent, result) {
  const detail = result && result.detail ? String(result.detail) : '';
  switch (result && result.state) {
    case 'waiting':
      return `Retried: ${agent} is still unreachable${detail ? ` (${detail})` : ''}. The task waits; retry again later.`;
    case 'working':
      return `Retried: ${agent} answered; the task is followed again.`;
    case 'ended':
      return `Retried: the delegation ended${detail ? ` (${stateName(detail) || detail})` : ''}.`;
    default:
      return `Retried: ${JSON.stringify(result)}`;
  }
}

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
        for (const t of this.tasks.values()) if (t.run_id === e.run_id) t.parked = false;
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
          t.parked = false;
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
      case 'tool.interrupted': {
        const t = this.tasks.get(e.call_id);
        if (t) t.parked = false;
        this.interrupted((t) => t.call_id === e.call_id);
        break;
      }
      default:
        break;
    }
  }

  updated(e) {
    let t = this.tasks.get(e.call_id);
    if (!t) {
      t = { index: this.tasks.size + 1, call_id: e.call_id, run_id: e.run_id, agent: e.agent, task_id: null, state: 'submitted', detail: '', history: [], result: null, parked: false, retrying: false };
      t.body = h('div', {});
      // Outside the part that is rebuilt, so a screen reader hears each retry's answer.
      t.status = h('p', { class: 'delegate-retry-status small', role: 'status', 'aria-live': 'polite' });
      t.el = h('li', { class: 'delegate', 'data-call': e.call_id }, t.body, t.status);
      this.tasks.set(e.call_id, t);
      this.list.append(t.el);
      this.el.hidden = false;
    }
    if (e.task_id) t.task_id = e.task_id;
    // A retry of a parked call that fails again (`unreachable`, then a new `waiting`)
    // leaves it waiting.
    const stillParked = t.parked && e.step === 'unreachable';
    if (e.step === 'waiting') t.parked = true;
    else if (PROGRESS.has(e.step)) t.parked = false;
    const state = e.step === 'unreachable' ? 'unreachable' : stateName(e.state);
    if (e.step === 'waiting' || stillParked) t.state = 'waiting';
    else if (state) t.state = state;
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

  /** *Retry*: `delegate.retry` of the parked call; the answer goes to the card's status. */
  async retry(t) {
    if (t.retrying) return;
    t.retrying = true;
    t.status.textContent = `Retrying ${t.agent}…`;
    this.render(t);
    let text;
    try {
      const result = await this.conn.request('delegate.retry', { session_id: this.sessionId, call_id: t.call_id });
      if (result && (result.state === 'working' || result.state === 'ended')) t.parked = false;
      text = retryOutcome(t.agent, result);
    } catch (err) {
      text = err.code === 'not_found'
        ? 'Retry: the call no longer waits for its agent (it ended, or the backend restarted since).'
        : 'Retry failed: ' + err.message;
    }
    t.retrying = false;
    t.status.textContent = text;
    this.render(t);
  }

  render(t) {
    const summaryId = `delegate-${t.index}-title`;
    const detailId = `delegate-${t.index}-detail`;
    const focused = document.activeElement;
    const hadRetryFocus = !!(focused && t.body.contains(focused) && focused.classList.contains('delegate-retry'));
    const old = t.body.querySelector('.delegate-steps');
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
    const waiting = t.parked && !t.result;
    const retry = waiting
      ? h('button', {
        type: 'button',
        class: 'delegate-retry',
        'aria-label': `Retry the task delegated to ${t.agent}`,
        'aria-describedby': t.detail ? detailId : undefined,
        'aria-disabled': t.retrying ? 'true' : undefined,
        title: 'Asks the agent again now; the same remote task goes on, nothing is sent twice',
      }, t.retrying ? 'Retrying…' : 'Retry')
      : null;
    if (retry) retry.addEventListener('click', () => this.retry(t));
    const steps = h('ol', { class: 'delegate-history' }, t.history.map((s) => h('li', {},
      STEPS[s.step] || s.step, s.state ? [' ', h('span', { class: 'badge ' + s.state }, s.state)] : null,
      s.detail ? [': ', h('span', { class: 'said' }, s.detail)] : null)));
    append(clear(t.body), [
      h('article', { 'aria-labelledby': summaryId },
        h('h3', { id: summaryId, class: 'delegate-head' },
          h('span', { class: 'delegate-agent' }, t.agent), ' ',
          h('span', { class: 'badge delegate-state ' + t.state }, t.state)),
        h('p', { class: 'small muted' }, 'Remote task ', t.task_id ? h('code', { class: 'delegate-task' }, t.task_id) : '(not created yet)'),
        t.detail ? h('p', { class: 'delegate-detail small', id: detailId }, t.detail) : null,
        h('details', { class: 'delegate-steps', open: historyOpen }, h('summary', {}, `History (${t.history.length})`), steps),
        t.result ? h('details', { class: 'delegate-result', open: true },
          h('summary', {}, t.result.is_error ? 'Result (error)' : 'Result'),
          h('pre', { class: 'output', tabindex: '0', 'aria-label': `Result of the task delegated to ${t.agent}` }, t.result.text)) : null,
        retry || stop ? h('div', { class: 'buttons' }, retry, stop) : null),
    ]);
    // A rebuilt card keeps the keyboard where it was.
    if (hadRetryFocus && retry) retry.focus();
  }
}
