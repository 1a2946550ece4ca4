// Keeps the friends' map part of AppState (and the message threads) in step with the relay: what is
// loaded after each sign-in, and what each friends' map event changes.
//
// Who shares with us at all times is not listed by the relay: `friend.location` answers for a friend
// who does (with their last position) and is `forbidden` for one who does not, has paused for us, or
// is no friend, so each friend is asked once after sign-in. After that `friend.sharing` says who
// starts or stops, `friend.removed` (also a block) takes a friend off at once, and a `pos` from a
// friend whose walk or alarm we do not follow is a standing share (one whose pause for us ended).

import { RelayError } from './relay.js';

export async function loadFriendsMap(app) {
  const { state, socket } = app;
  if (!state.hasFriendsMap) return;
  const [sharing, meetings] = await Promise.all([socket.request('share.always'), socket.request('meet.list')]);
  state.setSharing(sharing);
  state.setMeetings(meetings.meetings);
  for (const username of [...state.sharers.keys()]) if (!state.friends.has(username)) state.dropSharer(username); // unfriended while we were away
  await Promise.all([...state.friends.keys()].map((username) => locateFriend(app, username)));
}

/** Asks the relay for a friend's last position: on the map if they share with us, off it if not. */
export async function locateFriend(app, username) {
  try {
    const reply = await app.socket.request('friend.location', { username });
    app.state.setSharer(username, reply.position);
    return reply;
  } catch (error) {
    if (error instanceof RelayError && (error.code === 'forbidden' || error.code === 'not_found')) {
      app.state.dropSharer(username);
      return null;
    }
    throw error;
  }
}

/** Applies one relay event; false when it is not a friends' map event. */
export function handleFriendsMapEvent(app, message) {
  const { state, messages } = app;
  switch (message.type) {
    case 'friend.sharing':
      if (message.sharing) {
        state.setSharer(message.username, null);
        locateFriend(app, message.username).catch(() => {});
      } else {
        state.dropSharer(message.username);
      }
      return true;
    case 'location.resumed':
      refreshSharing(app); // one of our pauses ended by its time: read what is left
      return true;
    case 'meet':
      state.setMeeting(message.meeting);
      if (message.meeting.from.username !== state.me?.username) {
        app.announce(`${message.meeting.from.name || message.meeting.from.username} proposes to meet at ${message.meeting.name}`);
      }
      return true;
    case 'meet.response':
    case 'meet.delivered': {
      const meeting = state.meetings.get(message.meetingId);
      if (meeting) {
        const who = message.type === 'meet.response' ? message.by : message.to;
        meeting.invited = meeting.invited.map((invitee) => (invitee.username !== who ? invitee
          : message.type === 'meet.response' ? { ...invitee, response: message.response } : { ...invitee, deliveredAt: message.deliveredAt }));
        state.setMeeting(meeting);
      }
      return true;
    }
    case 'meet.cancelled':
      if (state.meetings.delete(message.meetingId)) state.changed('meetings');
      return true;
    case 'msg': {
      const from = messages.add(message.message);
      if (from && app.readingThread !== from) {
        app.announce(`New message from ${state.nameOf(from)}`);
      }
      state.changed('messages');
      return true;
    }
    case 'msg.delivered':
      messages.update(message.messageId, { deliveredAt: message.deliveredAt });
      state.changed('messages');
      return true;
    case 'msg.read':
      messages.update(message.messageId, { readAt: message.readAt });
      state.changed('messages');
      return true;
    default:
      return false;
  }
}

/** A `pos` from a friend: their dot on the friends' map moves (see the comment at the top). */
export function friendMoved(app, message, explained) {
  const { state } = app;
  if (!state.hasFriendsMap) return;
  if (state.sharers.has(message.from) || (!explained && state.friends.has(message.from))) state.setSharer(message.from, message);
}

/** A friendship ended (unfriended or blocked): their dot, and the meeting points between us, go at once. */
export function friendGone(app, username) {
  const { state } = app;
  state.dropSharer(username);
  let changed = false;
  for (const [id, meeting] of state.meetings) {
    const mine = meeting.from.username === state.me?.username;
    if (meeting.from.username === username || (mine && meeting.invited.every((i) => i.username === username))) {
      state.meetings.delete(id);
      changed = true;
    }
  }
  if (changed) state.changed('meetings');
}

/** Reads whom we share with again (after an alarm starts or ends: `alarmRecipients` changes). */
export function refreshSharing(app) {
  if (!app.state.hasFriendsMap) return;
  app.socket.request('share.always').then((reply) => app.state.setSharing(reply)).catch(() => {});
}
