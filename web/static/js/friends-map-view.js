// The friends' map: every friend who shares with you at all times (name, last fix and its age, moving
// live), your meeting points, your pauses (with the time left), and while a walk or an alarm of yours
// is on, who still sees you. Tap a friend for details (friend.location asks the relay afresh); tap
// the map to propose a meeting point there.

import { h, mount, agoText, formValues } from './dom.js';
import { FriendsMapCanvas } from './friends-map-canvas.js';
import { locateFriend } from './friends-map-sync.js';
import { pauseBanners, whoSeesMeCard } from './sharing-view.js';
import { coordinates, displayName, distance, when, localInputValue } from './format.js';

export function renderFriendsMap(app, main) {
  const { state, socket } = app;
  let selected = null; // the friend whose details are open
  let pick = null;
  const banners = h('div', { id: 'pauses' });
  const whoCard = h('div', { id: 'who-sees-me' });
  const mapBox = h('div', { class: 'map', id: 'friends-map' });
  const proposal = h('div', { id: 'meeting-proposal' });
  const details = h('div', { id: 'friend-details' });
  const list = h('section', { 'aria-labelledby': 'sharers-title' });
  const meetingList = h('section', { 'aria-labelledby': 'meetings-title' });
  mount(main,
    h('header', { class: 'top' },
      h('button', { type: 'button', class: 'link', onclick: () => app.show({ name: 'home' }) }, '‹ Back'),
      h('h1', {}, 'Friends’ map'),
      h('button', { type: 'button', class: 'link', id: 'open-sharing', onclick: () => app.show({ name: 'sharing' }) }, 'Who sees me')),
    banners, whoCard, mapBox,
    h('p', { class: 'muted small' }, 'Tap the map to propose a meeting point there.'),
    proposal, details, list, meetingList);

  const act = (promise) => promise.catch((error) => app.reportError(error));
  let canvas = null;
  let disposed = false;
  app.mapSupport.then((support) => {
    if (disposed) return;
    canvas = new FriendsMapCanvas(mapBox, support, { onSelect: select, onPick: propose });
    canvas.refresh();
    drawMap();
  });

  function sharers() {
    return [...state.sharers.values()]
      .map((s) => ({ ...s, name: state.nameOf(s.username) }))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  function drawMap() {
    if (!canvas) return;
    canvas.draw({ friends: sharers(), meetings: [...state.meetings.values()], pick });
  }

  function drawList() {
    const friends = sharers();
    mount(list, h('h2', { id: 'sharers-title' }, 'Sharing with you'),
      friends.length === 0 ? h('p', { class: 'muted' }, 'No friend shares their location with you at all times.') : null,
      h('ul', { class: 'sharers', 'aria-label': 'Friends sharing with you' }, friends.map((f) => h('li', { dataset: { username: f.username } },
        h('button', { type: 'button', class: 'sharer', 'aria-pressed': String(selected === f.username), onclick: () => select(f.username) },
          h('span', { class: 'name' }, f.name),
          h('span', { class: 'meta' }, f.position ? agoText(f.position.ts) : 'no position yet'))))));
  }

  function drawDetails() {
    const sharer = selected && state.sharers.get(selected);
    if (!sharer) {
      selected = null;
      mount(details);
      return;
    }
    const friend = state.friends.get(selected) || { username: selected };
    const pos = sharer.position;
    mount(details, h('section', { class: 'card friend-details', 'aria-labelledby': 'friend-details-title' },
      h('h2', { id: 'friend-details-title' }, displayName(friend)),
      h('dl', { class: 'facts' },
        h('dt', {}, 'Last fix'), h('dd', {}, pos ? agoText(pos.ts, { id: 'friend-fix-age' }) : 'no position yet'),
        pos ? [h('dt', {}, 'Position'), h('dd', {}, coordinates(pos))] : null,
        pos && typeof pos.acc === 'number' ? [h('dt', {}, 'Accuracy'), h('dd', {}, `± ${distance(pos.acc)}`)] : null,
        pos && typeof pos.batt === 'number' ? [h('dt', {}, 'Battery'), h('dd', {}, `${Math.round(pos.batt)} %`)] : null),
      h('div', { class: 'actions' },
        h('button', { type: 'button', onclick: () => act(locateFriend(app, friend.username)) }, 'Update'),
        h('button', { type: 'button', onclick: () => app.show({ name: 'thread', username: friend.username }) }, 'Message'),
        h('button', { type: 'button', onclick: () => { selected = null; drawDetails(); drawList(); } }, 'Close'))));
  }

  function select(username) {
    selected = username;
    drawDetails();
    drawList();
    act(locateFriend(app, username));
  }

  /** The proposal form for the tapped place: name, time, friends. */
  function propose(place) {
    pick = place;
    drawMap();
    const friends = [...state.friends.values()].sort((a, b) => a.username.localeCompare(b.username));
    const form = h('form', { class: 'card', 'aria-labelledby': 'propose-title', onsubmit: (event) => { event.preventDefault(); act(send(form)); } },
      h('h2', { id: 'propose-title' }, 'Propose a meeting point'),
      h('p', { class: 'muted small' }, `At ${coordinates(place)}`),
      h('label', {}, 'Name of the place', h('input', { name: 'name', required: true, maxlength: 100, placeholder: 'The fountain' })),
      h('label', {}, 'Time', h('input', { name: 'time', type: 'datetime-local', required: true, value: localInputValue(Date.now() + 30 * 60000) })),
      h('fieldset', {}, h('legend', {}, 'Friends to invite'),
        friends.length ? friends.map((f) => h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'to', value: f.username }), displayName(f)))
          : h('p', { class: 'muted' }, 'No friends yet.')),
      h('div', { class: 'actions' },
        h('button', { type: 'submit', class: 'primary' }, 'Propose'),
        h('button', { type: 'button', onclick: closeProposal }, 'Cancel')));
    mount(proposal, form);
    form.scrollIntoView({ block: 'nearest' });
  }

  async function send(form) {
    const values = formValues(form);
    const to = [...form.querySelectorAll('input[name=to]:checked')].map((input) => input.value);
    if (!to.length) { app.notify('Choose at least one friend'); return; }
    const time = new Date(values.time).getTime();
    try {
      const reply = await socket.request('meet.propose', { to, lat: pick.lat, lon: pick.lon, name: values.name, time });
      state.setMeeting(reply.meeting);
      closeProposal();
      app.notify(`Proposed ${reply.meeting.name}`);
    } catch (error) {
      app.notify(error.code === 'bad_request' ? `Not proposed: ${error.message}` : error.message);
    }
  }

  function closeProposal() {
    pick = null;
    mount(proposal);
    drawMap();
  }

  function drawMeetings() {
    const meetings = [...state.meetings.values()].sort((a, b) => a.time - b.time);
    mount(meetingList, h('h2', { id: 'meetings-title' }, 'Meeting points'),
      meetings.length === 0 ? h('p', { class: 'muted' }, 'None yet.') : null,
      meetings.map((m) => meetingCard(app, m, act)));
  }

  function draw() {
    mount(banners, pauseBanners(app));
    mount(whoCard, whoSeesMeCard(app));
  }

  const onChange = (event) => {
    const what = event.detail;
    if (what === 'sharers' || what === 'friends') { drawList(); drawDetails(); drawMap(); }
    if (what === 'meetings') { drawMeetings(); drawMap(); }
    if (what === 'sharing' || what === 'own' || what === 'alarms' || what === 'sessions' || what === 'friends') draw();
  };
  state.addEventListener('changed', onChange);
  draw();
  drawList();
  drawDetails();
  drawMeetings();
  return () => {
    disposed = true;
    state.removeEventListener('changed', onChange);
    if (canvas) canvas.destroy();
  };
}

/** One meeting point: where, when, who was asked and how they answered; accept/decline or cancel. */
function meetingCard(app, meeting, act) {
  const { state, socket } = app;
  const me = state.me?.username;
  const mine = meeting.from.username === me;
  const myInvite = meeting.invited.find((i) => i.username === me);
  const answer = (type) => act(socket.request(type, { meetingId: meeting.meetingId }).then((reply) => state.setMeeting(reply.meeting)));
  const responses = { pending: 'no answer yet', accepted: 'accepted', declined: 'declined' };
  return h('article', { class: 'card meeting', 'aria-label': `Meeting point ${meeting.name}`, dataset: { meeting: meeting.meetingId } },
    h('h3', {}, meeting.name),
    h('p', {}, mine ? 'Proposed by you' : ['Proposed by ', h('strong', {}, displayName(meeting.from))], ` for ${when(meeting.time)}`),
    h('p', { class: 'muted small' }, `At ${coordinates(meeting)}`),
    myInvite ? h('p', { class: 'muted small' }, `Sent ${when(myInvite.queuedAt)}`,
      myInvite.deliveredAt && myInvite.deliveredAt !== myInvite.queuedAt ? `, reached you ${when(myInvite.deliveredAt)} (you were offline)` : ', reached you at once') : null,
    h('ul', { class: 'plain invitees' }, meeting.invited.map((i) => h('li', { dataset: { username: i.username } },
      h('strong', {}, i.username === me ? 'You' : state.nameOf(i.username)), `: ${responses[i.response] || i.response}`,
      mine ? h('span', { class: 'muted small' }, i.deliveredAt ? ` (delivered ${when(i.deliveredAt)})` : ` (queued ${when(i.queuedAt)}: offline, gets it when back)`) : null))),
    h('div', { class: 'actions' },
      mine ? h('button', { type: 'button', onclick: () => act(socket.request('meet.cancel', { meetingId: meeting.meetingId }).then(() => {
        state.meetings.delete(meeting.meetingId);
        state.changed('meetings');
      })) }, 'Cancel meeting point') : null,
      myInvite && myInvite.response !== 'accepted' ? h('button', { type: 'button', class: 'primary', onclick: () => answer('meet.accept') }, 'Accept') : null,
      myInvite && myInvite.response !== 'declined' ? h('button', { type: 'button', onclick: () => answer('meet.decline') }, 'Decline') : null));
}
