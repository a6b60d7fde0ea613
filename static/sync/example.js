// The example page of the client library: two devices in one page, each a SyncClient with its own IndexedDB store.
// Every value shown comes from the user or the server and is set with textContent, never as HTML.
import { SyncClient, createIndexedDbStore } from './fleetsync-client.js';

const SAVED = 'fleetsync-example';
const TABLE = 'customers';
const devices = {};

function panel(name) {
  return document.querySelector(`[data-device="${name}"]`);
}

function log(name, text) {
  const li = document.createElement('li');
  li.textContent = `${new Date().toLocaleTimeString()} ${text}`;
  panel(name).querySelector('.log').prepend(li);
}

/** A fetch the page can switch off, standing in for the device losing its network. */
function switchableFetch(state) {
  return (input, init) => (state.online ? fetch(input, init) : Promise.reject(new TypeError('offline (demo switch)')));
}

async function openDevice(name, demo) {
  const net = { online: true };
  const store = await createIndexedDbStore(`fleetsync-example-${name}-${demo.businessId}`);
  const client = await SyncClient.open({ baseUrl: location.origin, businessId: demo.businessId, store, fetch: switchableFetch(net) });
  if (!client.user) await client.login({ email: demo.email, password: demo.password });
  const d = { name, client, net, demo };
  devices[name] = d;
  const el = panel(name);
  client.on('state', (s) => { el.querySelector('.state').textContent = s; el.dataset.state = s; });
  client.on('change', (e) => { log(name, `pulled ${e.data ? JSON.stringify(e.data) : 'delete'} (v${e.version})`); void render(d); });
  client.on('conflict', () => void render(d));
  client.on('error', (e) => log(name, `${e.code}: ${e.message}`));
  el.querySelector('.online').onchange = (ev) => {
    net.online = ev.target.checked;
    if (net.online) client.start();
    else client.stop();
    el.querySelector('.state').textContent = net.online ? 'syncing' : 'offline';
    el.dataset.state = net.online ? 'syncing' : 'offline';
  };
  el.querySelector('.edit').onsubmit = async (ev) => {
    ev.preventDefault();
    const input = el.querySelector('.name');
    await client.put(TABLE, demo.recordId, { name: input.value });
    log(name, `saved "${input.value}" locally`);
    input.value = '';
    await render(d);
  };
  client.start();
  await render(d);
  return d;
}

async function render(d) {
  // Renders overlap (a pulled change, a resolution): each reads first and draws only if no later one began, so a
  // slow read of the state before a resolution never draws its conflict back after the resolution's render.
  const seq = (d.renders = (d.renders ?? 0) + 1);
  const [data, conflicts] = await Promise.all([d.client.get(TABLE, d.demo.recordId), d.client.conflicts()]);
  if (seq !== d.renders) return;
  const el = panel(d.name);
  el.querySelector('.value').textContent = data ? data.name : '(none)';
  el.querySelector('.pending').textContent = d.client.pendingChanges ? `${d.client.pendingChanges} change(s) waiting to be sent` : '';
  const box = el.querySelector('.conflicts');
  box.replaceChildren();
  for (const c of conflicts) {
    const div = document.createElement('div');
    div.className = 'conflict';
    const p = document.createElement('p');
    p.textContent = `Conflict: this device wrote "${c.local?.name}", the server has "${c.remote?.name}".`;
    div.append(p);
    for (const [choice, label] of [['local', 'Keep mine'], ['remote', 'Take theirs']]) {
      const b = document.createElement('button');
      b.textContent = label;
      b.dataset.choice = choice;
      b.onclick = async () => {
        await d.client.resolveConflict(c.id, choice);
        log(d.name, `resolved conflict ${c.id}: ${choice}`);
        await render(d);
      };
      div.append(b);
    }
    box.append(div);
  }
}

async function start() {
  let demo = JSON.parse(window.localStorage.getItem(SAVED) ?? 'null');
  const setup = document.getElementById('setup');
  if (!demo) {
    setup.textContent = 'creating a demo account and business...';
    const password = `demo-${window.crypto.randomUUID()}`;
    const email = `demo-${window.crypto.randomUUID().slice(0, 8)}@example.com`;
    const first = await SyncClient.open({ baseUrl: location.origin, store: await createIndexedDbStore(`fleetsync-example-setup-${email}`) });
    await first.register({ email, name: 'Demo user', password });
    const business = await first.createBusiness({ name: 'Demo Pty Ltd', abn: '51824753556' });
    await first.logout();
    await first.close();
    demo = { email, password, businessId: business.id, recordId: window.crypto.randomUUID() };
    window.localStorage.setItem(SAVED, JSON.stringify(demo));
  }
  await Promise.all(['A', 'B'].map((n) => openDevice(n, demo)));
  setup.textContent = `signed in as ${demo.email}`;
  document.body.dataset.ready = 'true';
}

document.getElementById('start').onclick = () => start().catch(async (e) => {
  // A device opened before the failure gives its store back, so Start can try again.
  for (const [name, d] of Object.entries(devices)) { await d.client.close(); delete devices[name]; }
  document.getElementById('setup').textContent = e.code === 'store_in_use'
    ? 'The demo is open in another tab of this browser: one tab owns its devices at a time. Close the other tab, then press Start.'
    : `failed: ${e.message}`;
});
document.getElementById('reset').onclick = async () => {
  for (const d of Object.values(devices)) await d.client.close();
  window.localStorage.removeItem(SAVED);
  location.reload();
};
if (window.localStorage.getItem(SAVED)) document.getElementById('start').click();
