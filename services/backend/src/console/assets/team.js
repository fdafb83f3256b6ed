// The team chat panel: shown once the session has entered a team (`team.entered`). The
// team as a group chat — the leader's hand-offs (`lead → member: task`), messages between
// members (when the team's `transcript.show_member_dialogue` allows), each task's end with
// the member's summary, rounds, the contract and gate results (output collapsed) — and each
// member's status, follow-ups and how they were settled, and — when the team's
// `transcript.show_thinking` is on — each member's thinking (`team.member_thinking` on its
// stream), dimmed and collapsed. Like the TUI, it reads only the team events: members' tool
// payloads stay in the journal.

import { h, append, clear } from './dom.js';

// "→", read out as "to".
const arrow = () => [h('span', { class: 'arrow', 'aria-hidden': 'true' }, '→'), h('span', { class: 'sr-only' }, 'to')];

// A task's end status as a member's state.
const ENDED = { completed: 'done', failed: 'failed', interrupted: 'interrupted' };

export class TeamChat {
  constructor() {
    this.teams = new Map(); // team_run_id -> {team, display_name, entry_agent, dialogue}
    this.current = null; // the team the session is in (or was in last)
    this.members = new Map(); // member -> status, for the current team
    this.title = h('p', { id: 'team-name' });
    this.memberList = h('ul', { class: 'team-members', id: 'team-members', 'aria-label': 'Members' });
    this.note = h('p', { class: 'muted small', id: 'team-dialogue-note', hidden: true },
      'Messages between members are not shown: the team\'s transcript settings hide them.');
    this.chat = h('ol', { class: 'team-chat', id: 'team-chat' });
    this.log = h('div', { class: 'team-log', role: 'log', tabindex: '0', 'aria-label': 'Team conversation' }, this.chat);
    const body = h('div', { class: 'panel-body' },
      this.title,
      h('h3', {}, 'Members'), this.memberList,
      h('h3', {}, 'Conversation'), this.note, this.log);
    this.el = h('section', { class: 'panel team', id: 'team', 'aria-labelledby': 'team-title', hidden: true },
      h('h2', { id: 'team-title' }, 'Team chat'), body);
  }

  /** Takes every event frame of the session, in order; ignores what is not the team's. */
  apply(frame) {
    const e = frame.event;
    const onBoard = frame.stream.startsWith('team/') && frame.stream.split('/').length === 2;
    if (frame.stream === 'main') {
      switch (e.kind) {
        case 'team.entered': return this.entered(e);
        case 'team.exited': return this.exited(e);
        case 'team.completed': {
          const t = this.teams.get(e.team_run_id);
          const left = e.follow_ups || [];
          this.line('completed', t && t.entry_agent, [`finished the team's work after ${e.rounds} round(s): `, this.text(e.summary),
            left.length ? h('ul', { class: 'criteria', 'aria-label': 'Follow-ups not done' }, left.map((f) => h('li', {},
              h('code', {}, f.follow_up_id), ' ', this.badge(f.status), ' ', this.text(f.item), f.reason ? ` (${f.reason})` : ''))) : null]);
          return undefined;
        }
        case 'run.started': return this.leader('running');
        case 'run.completed':
        case 'run.failed': return this.leader('idle');
        case 'run.interrupted': return this.leader('interrupted');
        default: return undefined;
      }
    }
    const t = this.teams.get(e.team_run_id);
    if (!t) return undefined;
    // A member's own stream: only its thinking, when the team shows it; tools and text stay out.
    if (!onBoard) {
      if (e.kind === 'team.member_thinking' && t.thinking) this.thinking(e);
      return undefined;
    }
    switch (e.kind) {
      case 'team.contract_written':
        this.line('contract', t.entry_agent, ['wrote the contract: ', this.text(e.goal),
          (e.acceptance_criteria || []).length ? h('ul', { class: 'criteria' }, e.acceptance_criteria.map((c) => h('li', {}, c))) : null]);
        break;
      case 'team.round_started':
        this.line('round', null, [`Round ${e.round}`, e.recovery ? ' (recovery)' : '', e.reason ? `: ${e.reason}` : '']);
        break;
      case 'team.round_ended':
        this.line('round', null, [`Round ${e.round} `, this.badge(e.passed ? 'passed' : 'failed'),
          !e.passed && (e.failures || []).length ? `: ${e.failures.join('; ')}` : '']);
        break;
      case 'team.task_dispatched':
        this.line('handoff', t.entry_agent, [arrow(), ' ', h('strong', {}, e.agent), e.retry_of ? ' (again)' : '', ': ', this.text(e.task)]);
        this.setMember(e.team_run_id, e.agent, 'running');
        break;
      case 'team.task_ended': {
        const status = ENDED[e.status] || e.status;
        this.line('result', e.agent, [this.badge(status), ' ', this.text(e.summary || '(no summary)')]);
        this.setMember(e.team_run_id, e.agent, status);
        break;
      }
      case 'team.message_sent':
        if (!t.dialogue) break;
        this.line('message', e.from, [arrow(), ' ', h('strong', {}, e.to), ': ', this.text(e.text)]);
        break;
      case 'team.gate_checked':
        this.line('gate', null, ['Gate ', h('code', {}, e.name), ' ', this.badge(e.passed ? 'passed' : 'failed'),
          e.output ? h('details', { class: 'gate-output' }, h('summary', {}, 'Output'), h('pre', { class: 'output', tabindex: '0' }, e.output)) : null],
        { 'data-gate': e.name });
        break;
      case 'team.follow_up_opened':
        this.line('follow-up', e.by, ['follow-up ', h('code', {}, e.follow_up_id), ' ', this.badge('open'), ': ', this.text(e.item)],
          { 'data-follow-up': e.follow_up_id });
        break;
      case 'team.follow_up_resolved':
        this.line('follow-up', e.by, [h('code', {}, e.follow_up_id), ' ', this.badge(e.disposition), e.reason ? ': ' : '', e.reason ? this.text(e.reason) : ''],
          { 'data-follow-up': e.follow_up_id });
        break;
      default:
        break;
    }
    return undefined;
  }

  /** A member's thinking in one turn: dimmed, collapsed to its first line. */
  thinking(e) {
    const text = String(e.text || '');
    const first = (text.split('\n').find((l) => l.trim()) || '').trim();
    this.line('thinking', e.agent, [h('details', { class: 'thinking-text' },
      h('summary', {}, 'thinking: ', first.length > 120 ? first.slice(0, 120) + '…' : first),
      h('pre', { tabindex: '0' }, text))], { 'data-step': String(e.step) });
  }

  entered(e) {
    const t = {
      team: e.team, display_name: e.display_name || e.team, entry_agent: e.entry_agent,
      dialogue: e.show_member_dialogue !== false,
      thinking: e.show_thinking === true,
    };
    this.teams.set(e.team_run_id, t);
    this.current = e.team_run_id;
    this.members = new Map((e.members || []).map((m) => [m, 'idle']));
    this.el.hidden = false;
    this.note.hidden = t.dialogue;
    clear(this.title).append(h('strong', {}, t.display_name), ' ', h('span', { class: 'muted small' }, `(${t.team})`));
    this.line('team', null, [`Entered the team ${t.display_name}: `, (e.members || []).join(', ')]);
    this.renderMembers();
  }

  exited(e) {
    if (e.team_run_id !== this.current) return;
    this.teams.get(this.current).left = true;
    this.title.append(' ', this.badge('left'));
    this.line('team', null, ['Left the team.']);
  }

  /** The leader works when the session's run does (every top-level run is the leader's). */
  leader(status) {
    const t = this.teams.get(this.current);
    if (!t || t.left) return;
    this.setMember(this.current, t.entry_agent, status);
  }

  setMember(teamRunId, member, status) {
    if (teamRunId !== this.current || !this.members.has(member)) return;
    this.members.set(member, status);
    this.renderMembers();
  }

  renderMembers() {
    const t = this.teams.get(this.current);
    clear(this.memberList);
    for (const [name, status] of this.members) {
      this.memberList.append(h('li', { 'data-member': name },
        h('span', { class: 'member-name' }, name), t && name === t.entry_agent ? h('span', { class: 'muted small' }, ' (leader)') : null,
        ' ', this.badge(status)));
    }
  }

  badge(status) {
    return h('span', { class: 'badge ' + status }, status);
  }

  text(value) {
    return h('span', { class: 'said' }, String(value == null ? '' : value));
  }

  /** Appends one chat line: who (or the team itself), then what. */
  line(kind, who, parts, attrs = {}) {
    const follow = this.log.scrollTop + this.log.clientHeight >= this.log.scrollHeight - 8;
    const li = h('li', { class: 'team-line ' + kind, 'data-kind': kind, ...attrs });
    if (who) li.append(h('strong', { class: 'speaker' }, who), ' ');
    append(li, parts);
    this.chat.append(li);
    if (follow) this.log.scrollTop = this.log.scrollHeight;
  }
}
