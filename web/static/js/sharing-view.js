// "Who sees me": whom you share your location with at all times (share.always), and pauses (from
// everyone or one friend, until a time or until you resume: location.pause / location.resume).
// A pause stays on screen with its remaining time here, on the home screen and on the friends' map,
// so nobody forgets it is on. pauseBanners and whoSeesMe are shared with those screens.

import { h, mount, countdownText } from './dom.js';
import { displayName, when } from './format.js';

const DURATIONS = [
  ['15', '15 minutes'], ['60', '1 hour'], ['120', '2 hours'], ['480', '8 hours'],
  ['resume', 'until I resume'], ['time', 'until a time…'],
];

/** One banner per pause, each with its remaining time and a Resume button. */
export function pauseBanners(app) {
  const { state } = app;
  return state.sharing.pauses.map((pause) => h('div', { class: 'banner paused', role: 'status', dataset: { pause: pause.from || '' } },
    h('span', {}, pause.from ? `Location paused for ${state.nameOf(pause.from)}` : 'Location paused for everyone',
      ': ', pause.until ? ['ends ', countdownText(pause.until, { class: 'pause-left' }), ` (at ${when(pause.until)})`] : 'until you resume'),
    h('button', { type: 'button', class: 'resume', onclick: () => resume(app, pause.from) },
      pause.from ? `Resume for ${state.nameOf(pause.from)}` : 'Resume')));
}

async function resume(app, from) {
  try {
    app.state.setSharing(await app.socket.request('location.resume', from ? { from } : {}));
  } catch (error) {
    app.reportError(error);
  }
}

/**
 * Who gets my positions right now, and why: friends I share with at all times and the followers of my
 * walk (less those a pause hides me from), and the recipients of my alarm (whom no pause hides me from).
 */
export function whoSeesMe(state) {
  const pausedAll = state.sharing.pauses.some((p) => !p.from);
  const pausedFrom = new Set(state.sharing.pauses.map((p) => p.from).filter(Boolean));
  const hidden = (name) => pausedAll || pausedFrom.has(name);
  const seen = new Map();
  const add = (name, why) => { if (!seen.has(name)) seen.set(name, []); seen.get(name).push(why); };
  for (const name of state.sharing.with) if (!hidden(name)) add(name, 'at all times');
  const walk = state.own && !state.own.ended ? state.own : null;
  if (walk) for (const name of walk.session.observers) if (!hidden(name)) add(name, 'follows your walk');
  const alarmOn = [...state.alarms.values()].some((a) => a.from.username === state.me?.username);
  if (alarmOn) for (const name of state.sharing.alarmRecipients) add(name, hidden(name) ? 'your alarm, even while paused' : 'your alarm');
  return { walk: Boolean(walk), alarm: alarmOn, people: [...seen].map(([username, why]) => ({ username, why })) };
}

/** While a walk or an alarm is on: who still sees you. Null otherwise. */
export function whoSeesMeCard(app) {
  const { state } = app;
  const { walk, alarm, people } = whoSeesMe(state);
  if (!walk && !alarm) return null;
  const what = alarm && walk ? 'your walk and your alarm are' : alarm ? 'your alarm is' : 'your walk is';
  return h('section', { class: 'card who-sees-me', 'aria-labelledby': 'who-sees-me-title' },
    h('h2', { id: 'who-sees-me-title' }, `While ${what} on, who sees you`),
    people.length
      ? h('ul', { class: 'plain' }, people.map((p) => h('li', {}, h('strong', {}, state.nameOf(p.username)), ` (${p.why.join(', ')})`)))
      : h('p', {}, 'Nobody sees your position right now.'));
}

export function renderSharing(app, main) {
  const { state, socket } = app;
  const banners = h('div', { id: 'pauses' });
  const shareCard = h('section', { class: 'card', 'aria-labelledby': 'share-title' });
  const pauseCard = h('form', { class: 'card', id: 'pause-form', 'aria-labelledby': 'pause-title', onsubmit: pause });
  mount(main,
    h('header', { class: 'top' },
      h('button', { type: 'button', class: 'link', onclick: () => app.show({ name: 'map' }) }, '‹ Map'),
      h('h1', {}, 'Who sees me')),
    banners, shareCard, pauseCard);

  const act = (promise) => promise.catch((error) => app.reportError(error));

  function drawShare() {
    const friends = [...state.friends.values()].sort((a, b) => a.username.localeCompare(b.username));
    const chosen = new Set(state.sharing.with);
    const form = h('form', { onsubmit: (event) => { event.preventDefault(); act(save(form)); } },
      friends.length ? friends.map((f) => h('label', { class: 'check' },
        h('input', { type: 'checkbox', name: 'with', value: f.username, checked: chosen.has(f.username) }), displayName(f)))
        : h('p', { class: 'muted' }, 'No friends yet.'),
      h('button', { type: 'submit', class: 'primary' }, 'Save'));
    mount(shareCard, h('h2', { id: 'share-title' }, 'Share my location at all times with'),
      h('p', { class: 'muted' }, 'They see where you are whenever this app has your location, walk or not.'), form);
  }

  async function save(form) {
    const chosen = [...form.querySelectorAll('input[name=with]:checked')].map((input) => input.value);
    state.setSharing(await socket.request('share.always', { with: chosen }));
    app.notify(chosen.length ? `Sharing with ${chosen.map((u) => state.nameOf(u)).join(', ')}` : 'Sharing with nobody');
  }

  function drawPauseForm() {
    const friends = [...state.friends.values()].sort((a, b) => a.username.localeCompare(b.username));
    const chosen = h('div', { class: 'chosen hidden' }, friends.map((f) => h('label', { class: 'check' },
      h('input', { type: 'checkbox', name: 'pauseFrom', value: f.username }), displayName(f))));
    const toggle = () => chosen.classList.toggle('hidden', pauseCard.elements.scope.value !== 'chosen');
    const until = h('input', { type: 'datetime-local', name: 'until', 'aria-label': 'pause until', class: 'hidden' });
    const duration = h('select', { name: 'duration', onchange: () => until.classList.toggle('hidden', duration.value !== 'time') },
      DURATIONS.map(([value, text]) => h('option', { value }, text)));
    mount(pauseCard, h('h2', { id: 'pause-title' }, 'Pause my location'),
      h('fieldset', {}, h('legend', {}, 'Hide it from'),
        h('label', { class: 'check' }, h('input', { type: 'radio', name: 'scope', value: 'everyone', checked: true, onchange: toggle }), 'Everyone'),
        h('label', { class: 'check' }, h('input', { type: 'radio', name: 'scope', value: 'chosen', onchange: toggle }), 'Chosen friends'),
        chosen),
      h('label', {}, 'For', duration), until,
      h('p', { class: 'muted small' }, 'An alarm you raise still shows your position to its recipients.'),
      h('button', { type: 'submit', class: 'primary' }, 'Pause'));
  }

  async function pause(event) {
    event.preventDefault();
    const form = pauseCard;
    const duration = form.elements.duration.value;
    let until;
    if (duration === 'time') {
      until = new Date(form.elements.until.value).getTime();
      if (!Number.isFinite(until)) { app.notify('Choose the time the pause ends'); return; }
    } else if (duration !== 'resume') {
      until = Date.now() + Number(duration) * 60000;
    }
    // One pause per chosen friend (the relay keeps them apart), or one from everyone.
    const from = form.elements.scope.value === 'chosen'
      ? [...form.querySelectorAll('input[name=pauseFrom]:checked')].map((input) => input.value) : [null];
    if (!from.length) { app.notify('Choose the friends to pause for'); return; }
    try {
      for (const name of from) {
        state.setSharing(await socket.request('location.pause', { ...(name ? { from: name } : {}), ...(until ? { until } : {}) }));
      }
    } catch (error) {
      app.notify(error.code === 'bad_request' ? 'A pause must end in the future, at most 7 days ahead.' : error.message);
    }
  }

  const draw = () => mount(banners, pauseBanners(app));
  const onChange = (event) => {
    if (event.detail === 'sharing') { draw(); drawShare(); }
    if (event.detail === 'friends') { drawShare(); drawPauseForm(); }
  };
  state.addEventListener('changed', onChange);
  draw();
  drawShare();
  drawPauseForm();
  return () => state.removeEventListener('changed', onChange);
}
