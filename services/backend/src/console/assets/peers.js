// The A2A peers page (#/peers): the remote agents a2a_delegate may call (the a2a_peers
// setting) — `a2a.peers` over the same WebSocket: each peer's URL, how calls to it are
// authenticated, whether its Agent Card can be read now and what it says. Refresh reads
// every card again instead of taking it from the card cache.

import { h, clear } from './dom.js';

const AUTH = {
  none: 'none',
  bearer: 'bearer token',
  signed: 'peer signature',
  'bearer-and-signed': 'bearer token and peer signature',
};

export function peersPage(main, conn) {
  const list = h('div', { id: 'peers', 'aria-live': 'polite', 'aria-busy': 'true' });
  const error = h('p', { class: 'error', role: 'alert', id: 'peers-error' });
  const refresh = h('button', { type: 'button', id: 'peers-refresh', class: 'secondary' }, 'Refresh');
  refresh.addEventListener('click', () => load(true));

  main.append(h('section', { class: 'peers-page', 'aria-labelledby': 'peers-title' },
    h('div', { class: 'page-head' }, h('h1', { id: 'peers-title' }, 'A2A peers'), refresh),
    h('p', { class: 'muted' }, 'The remote agents ', h('code', {}, 'a2a_delegate'),
      ' may call (the ', h('code', {}, 'a2a_peers'), ' setting), and whether their Agent Card can be read now.'),
    error, list));

  async function load(again) {
    refresh.disabled = true;
    list.setAttribute('aria-busy', 'true');
    error.textContent = '';
    try {
      const { peers } = await conn.request('a2a.peers', again ? { refresh: true } : {});
      render(peers);
    } catch (e) {
      error.textContent = 'Cannot list the A2A peers: ' + e.message;
    } finally {
      refresh.disabled = false;
      list.setAttribute('aria-busy', 'false');
    }
  }

  function render(peers) {
    clear(list);
    if (peers.length === 0) {
      list.append(h('p', { class: 'muted' }, 'No A2A peers are configured. Add them to the ',
        h('code', {}, 'a2a_peers'), ' setting.'));
      return;
    }
    list.append(h('ul', { class: 'peers' }, peers.map(peerCard)));
  }

  load(false);
  return { dispose() {} };
}

function peerCard(p) {
  const up = p.state === 'reachable';
  const state = up
    ? `reachable · ${p.cached ? 'card cached' : p.latency_ms + ' ms'}`
    : 'unreachable';
  return h('li', { class: 'peer card', 'data-peer': p.name },
    h('h2', {}, p.name, ' ',
      h('span', { class: 'badge peer-state ' + p.state }, state)),
    h('dl', { class: 'peer-facts' },
      h('dt', {}, 'URL'), h('dd', { class: 'peer-url' }, p.url),
      h('dt', {}, 'Authentication'), h('dd', { class: 'peer-auth' }, AUTH[p.auth] || p.auth),
      up ? cardFacts(p.card) : [h('dt', {}, 'Reason'), h('dd', { class: 'peer-reason' }, p.reason)]));
}

function cardFacts(card) {
  const skills = card.skills.length
    ? h('ul', { class: 'peer-skills' }, card.skills.map((s) =>
      h('li', {}, s.name || s.id, ' ', h('code', {}, s.id))))
    : h('span', { class: 'muted' }, 'none');
  return [
    h('dt', {}, 'Agent'), h('dd', { class: 'peer-agent' }, card.name,
      card.version ? h('span', { class: 'muted' }, ' version ' + card.version) : null),
    card.description ? [h('dt', {}, 'Description'), h('dd', { class: 'peer-description' }, card.description)] : null,
    h('dt', {}, 'Protocol'), h('dd', {}, `A2A ${card.protocol_version}, ${card.streaming ? 'streaming' : 'no streaming'}`),
    h('dt', {}, 'Skills'), h('dd', {}, skills),
  ];
}
