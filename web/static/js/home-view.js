// The home screen: walks you follow, invitations, your own walk, alarms, friends and requests, and
// with the friends' map: the way to it (with what is new there), your pauses, unread messages.
// Lists are redrawn when the state changes; the add-friend form is drawn once so typing survives.

import { h, mount, formValues, agoText } from './dom.js';
import { displayName } from './format.js';
import { pauseBanners } from './sharing-view.js';
import { askedNow } from './walk-trail.js';

/** What the alarm-notifications card says in each state, and its button (none: nothing to do here). */
const NOTIFICATION_STATES = {
  on: ['On: alarms reach this browser even when Homeward is closed', 'Turn off'],
  off: ['Off: alarms reach you only while this page is open', 'Turn on'],
  working: ['One moment…', 'Turn on'],
  blocked: ['Blocked: allow notifications for this site in the browser’s settings', null],
  unsupported: ['Unsupported here', null],
  failed: ['Could not turn them on', 'Try again'],
};

export function renderHome(app, main) {
  const { state, socket } = app;
  const alarms = h('section', { id: 'alarms-list' });
  const walks = h('section', { id: 'walks' });
  const invites = h('section', { id: 'invites' });
  const own = h('section', { id: 'own-walk' });
  const friendsMap = h('section', { id: 'friends-map-entry' });
  const requests = h('section', { id: 'requests' });
  const friends = h('section', { id: 'friends' });
  const notifications = h('section', { class: 'card', id: 'alarm-notifications' });
  const addForm = h('form', { class: 'inline', id: 'add-friend', onsubmit: addFriend },
    h('input', { name: 'username', placeholder: 'Add a friend by username', 'aria-label': 'username to add', autocapitalize: 'none', required: true }),
    h('button', { type: 'submit' }, 'Ask'));

  mount(main,
    h('header', { class: 'top' }, h('h1', {}, 'Homeward'),
      h('button', { type: 'button', class: 'link', id: 'sign-out', onclick: () => app.signOut() }, 'Sign out')),
    alarms, own, friendsMap, walks, invites, requests,
    h('h2', {}, 'Friends'), friends, addForm, notifications);

  const act = (promise) => promise.catch((error) => app.reportError(error));

  function drawNotifications() {
    const control = app.notifications;
    const [text, button] = NOTIFICATION_STATES[control.status] || NOTIFICATION_STATES.failed;
    notifications.dataset.state = control.status;
    mount(notifications, h('h2', {}, 'Alarm notifications'),
      h('p', { class: 'muted', id: 'alarm-notifications-text' }, text, control.detail ? `: ${control.detail}` : ''),
      button ? h('button', {
        type: 'button', id: 'alarm-notifications-button', disabled: control.status === 'working',
        onclick: () => (control.status === 'on' ? control.turnOff() : control.turnOn()),
      }, button) : null);
  }

  function draw() {
    const activeAlarms = [...state.alarms.values()].filter((a) => a.from.username !== state.me?.username);
    mount(alarms, activeAlarms.map((alarm) => h('button', {
      type: 'button', class: 'alarm-banner', onclick: () => app.alarms.open(alarm.alarmId),
    }, `ALARM from ${alarm.from.name || alarm.from.username}: ${alarm.text}`)));

    const mine = state.own && !state.own.ended;
    mount(own, h('button', { type: 'button', class: mine ? 'primary sharing' : 'primary', id: 'share-walk', onclick: () => app.show({ name: 'walker' }) },
      mine ? 'Your walk is shared: open' : 'Share my walk'));

    if (state.hasFriendsMap) {
      const sharing = state.sharers.size;
      const me = state.me?.username;
      const proposals = [...state.meetings.values()].filter((m) => m.invited.some((i) => i.username === me && i.response === 'pending')).length;
      const facts = [sharing ? `${sharing} sharing with you` : null, proposals ? `${proposals} meeting point${proposals > 1 ? 's' : ''} to answer` : null].filter(Boolean);
      mount(friendsMap, pauseBanners(app),
        h('button', { type: 'button', class: 'map-entry', id: 'open-friends-map', onclick: () => app.show({ name: 'map' }) },
          h('strong', {}, 'Friends’ map'), facts.length ? h('span', { class: 'meta' }, facts.join(' · ')) : null));
    }

    const followed = [...state.following.values()];
    mount(walks, followed.length ? h('h2', {}, 'Walks you follow') : null,
      followed.map((walk) => {
        const owner = walk.session.owner;
        const status = walk.ended ? `ended (${walk.ended})`
          : walk.lost ? 'CONTACT LOST'
            : walk.last ? null : 'no position yet';
        return h('button', {
          type: 'button', class: `walk-item${walk.lost ? ' lost' : ''}${walk.ended ? ' ended' : ''}`,
          dataset: { session: walk.session.sessionId },
          onclick: () => app.show({ name: 'walk', sessionId: walk.session.sessionId }),
        }, h('strong', {}, owner.name || owner.username),
        walk.session.note ? h('span', { class: 'note' }, walk.session.note) : null,
        h('span', { class: 'meta' }, status || agoText(walk.last.ts)));
      }));

    const invited = [...state.invites.values()];
    mount(invites, invited.length ? h('h2', {}, 'Invitations') : null,
      invited.map((session) => h('div', { class: 'card invite', dataset: { session: session.sessionId } },
        h('p', {}, h('strong', {}, session.owner.name || session.owner.username), ' asks you to follow their walk',
          session.note ? h('span', { class: 'note' }, ` “${session.note}”`) : null),
        h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'primary accept', onclick: () => act(accept(session)) }, 'Follow'),
          h('button', { type: 'button', onclick: () => act(socket.request('session.decline', { sessionId: session.sessionId }).then(() => { state.invites.delete(session.sessionId); draw(); })) }, 'Decline')))));

    mount(requests, state.incoming.length ? h('h2', {}, 'Friend requests') : null,
      state.incoming.map((user) => h('div', { class: 'card request', dataset: { username: user.username } },
        h('p', {}, displayName(user)),
        h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'primary accept', onclick: () => act(socket.request('friend.accept', { username: user.username })) }, 'Accept'),
          h('button', { type: 'button', onclick: () => act(socket.request('friend.decline', { username: user.username }).then(refresh)) }, 'Decline')))));

    const list = [...state.friends.values()].sort((a, b) => (b.online - a.online) || a.username.localeCompare(b.username));
    mount(friends,
      list.length === 0 ? h('p', { class: 'muted' }, 'No friends yet: ask someone by their username.') : null,
      h('ul', { class: 'friends' }, list.map((friend) => h('li', { dataset: { username: friend.username, online: String(Boolean(friend.online)) } },
        h('span', { class: `dot ${friend.online ? 'online' : 'offline'}` }),
        h('span', { class: 'name' }, displayName(friend)),
        h('span', { class: 'meta' }, friend.online ? 'online' : friend.lastSeen ? ['seen ', agoText(friend.lastSeen)] : 'offline'),
        state.hasFriendsMap ? messageButton(friend) : null))),
      state.outgoing.length ? h('p', { class: 'muted' }, `Asked: ${state.outgoing.map((u) => '@' + u.username).join(', ')}`) : null);
  }

  function messageButton(friend) {
    const unread = app.messages.unread(friend.username);
    return h('button', {
      type: 'button', class: unread ? 'message unread' : 'message', dataset: { unread: String(unread) },
      onclick: () => app.show({ name: 'thread', username: friend.username }),
    }, unread ? `Messages (${unread} unread)` : 'Messages');
  }

  async function accept(session) {
    const askedAt = askedNow();
    const reply = await socket.request('session.accept', { sessionId: session.sessionId });
    state.invites.delete(session.sessionId);
    state.follow(reply.session, reply.position).setTrail(reply.trail, askedAt);
    app.show({ name: 'walk', sessionId: session.sessionId });
  }

  async function refresh() {
    state.setFriendList(await socket.request('friend.list'));
  }

  async function addFriend(event) {
    event.preventDefault();
    const { username } = formValues(addForm);
    try {
      const reply = await socket.request('friend.request', { username: username.toLowerCase() });
      app.notify(reply.status === 'friends' ? `You and @${username} are now friends` : `Asked @${username}`);
      addForm.reset();
      await refresh();
    } catch (error) {
      app.notify(error.code === 'not_found' ? `Nobody is called @${username}` : error.code === 'conflict' ? `Already friends with or asked @${username}` : error.message);
    }
  }

  const onChange = () => draw();
  state.addEventListener('changed', onChange);
  app.notifications.addEventListener('changed', drawNotifications);
  app.messages.addEventListener('changed', onChange);
  draw();
  drawNotifications();
  return () => {
    state.removeEventListener('changed', onChange);
    app.notifications.removeEventListener('changed', drawNotifications);
    app.messages.removeEventListener('changed', onChange);
  };
}
