// Entries: the ledger (claims, votes, cleanups, writers), filterable.
import { get } from '../api.js';
import { h, field, select, mono, name, card, Pager } from '../ui.js';

const t = { id: 'entries', title: 'Entries', hints: ['update-database', 'update-peers'] };

let pager, kind, all = [];

t.init = (root) => {
  kind = select('kind', [['', 'all kinds'], ['claim', 'claims'], ['vote', 'votes'], ['cleanup', 'cleanups'], ['writer', 'writers'], ['network', 'network']], '');
  kind.addEventListener('change', apply);
  pager = new Pager({
    headers: ['Kind', 'Domain', 'Key', 'Value'],
    match: (e, q) => e.key.toLowerCase().includes(q) || String(e.value).toLowerCase().includes(q),
    row: (e) => {
      const [k, d] = e.key.split(':');
      return h('tr', {}, h('td', {}, k), h('td', {}, k === 'claim' || k === 'vote' || k === 'cleanup' ? name(d) : ''),
        h('td', {}, mono(e.key)), h('td', {}, mono(String(e.value))));
    },
    empty: 'The ledger has no entries yet.',
  });
  root.append(card('Ledger', h('div', { class: 'row' }, field('Kind', kind)), pager.el));
};

function apply() {
  pager.page = 0;
  pager.set(kind.value ? all.filter((e) => e.key.startsWith(kind.value + ':')) : all);
}

t.refresh = async () => {
  all = await get('/api/entries');
  apply();
};

export default t;
