// What the app knows, updated from the relay's replies and events. Views read it; `changed` tells
// them which part moved ("friends", "sessions", "alarms", "own", "position:<sessionId>", and for the
// friends' map "sharers", "sharing", "meetings", "messages").

import { trailPositions, mergeTrail, trailStartsLate, markSeen } from './walk-trail.js';

export class AppState extends EventTarget {
  constructor() {
    super();
    this.reset();
  }

  reset() {
    this.me = null;
    this.features = [];
    this.vapidPublicKey = null; // the relay's Web Push key (protocol 1.1), from the sign-in reply
    this.friends = new Map(); // username -> {username, name, online, lastSeen}
    this.incoming = [];
    this.outgoing = [];
    this.invites = new Map(); // sessionId -> session
    this.following = new Map(); // sessionId -> Walk
    this.own = null; // Walk of the user's own session
    this.alarms = new Map(); // alarmId -> alarm (to me, or mine)
    // The friends' map (relay feature "friends-map").
    this.sharers = new Map(); // username -> {username, position|null}: friends who share with me at all times
    this.sharing = { with: [], pauses: [], alarmRecipients: [] }; // whom I share with, my pauses
    this.meetings = new Map(); // meetingId -> meeting, proposed by me or to me
  }

  get hasFriendsMap() {
    return this.features.includes('friends-map');
  }

  /** A friend shares with me (or still does): their last position, when the relay had one. */
  setSharer(username, position) {
    const known = this.sharers.get(username);
    const newer = position && typeof position.lat === 'number' && (!known?.position || (position.ts || 0) >= (known.position.ts || 0));
    this.sharers.set(username, { username, position: newer ? position : known?.position || null });
    this.changed('sharers');
  }

  /** A friend stopped sharing, unfriended or blocked me: off the map at once. */
  dropSharer(username) {
    if (this.sharers.delete(username)) this.changed('sharers');
  }

  /** The reply of share.always, location.pause and location.resume. */
  setSharing(reply) {
    this.sharing = { with: reply.with || [], pauses: reply.pauses || [], alarmRecipients: reply.alarmRecipients || [] };
    this.changed('sharing');
  }

  setMeeting(meeting) {
    this.meetings.set(meeting.meetingId, meeting);
    this.changed('meetings');
  }

  setMeetings(list) {
    this.meetings = new Map((list || []).map((m) => [m.meetingId, m]));
    this.changed('meetings');
  }

  /** A friend's name as the friend list has it (the username until it is known). */
  nameOf(username) {
    const friend = this.friends.get(username);
    return friend?.name || username;
  }

  changed(what) {
    this.dispatchEvent(new CustomEvent('changed', { detail: what }));
  }

  /** A followed session, kept with the track seen since the page opened. */
  follow(session, position) {
    let walk = this.following.get(session.sessionId);
    if (!walk) {
      walk = new Walk(session);
      this.following.set(session.sessionId, walk);
    } else {
      walk.session = session;
    }
    if (position) walk.add(position);
    return walk;
  }

  walksOf(username) {
    const walks = [...this.following.values()].filter((w) => w.session.owner.username === username && !w.ended);
    if (this.own && this.own.session.owner.username === username) walks.push(this.own);
    return walks;
  }

  setFriendList(reply) {
    this.friends = new Map((reply.friends || []).map((f) => [f.username, f]));
    this.incoming = reply.incoming || [];
    this.outgoing = reply.outgoing || [];
    this.changed('friends');
  }

  setSessionList(reply) {
    const keep = this.following;
    this.following = new Map();
    for (const session of reply.following || []) {
      const old = keep.get(session.sessionId);
      if (old) {
        old.session = session;
        this.following.set(session.sessionId, old);
      } else {
        this.follow(session);
      }
    }
    // Ended walks stay on screen (with their end) until the user closes them.
    for (const [id, walk] of keep) if (walk.ended && !this.following.has(id)) this.following.set(id, walk);
    this.invites = new Map((reply.invites || []).map((s) => [s.sessionId, s]));
    if (reply.own) {
      if (!this.own || this.own.session.sessionId !== reply.own.sessionId) this.own = new Walk(reply.own);
      else this.own.session = reply.own;
    } else if (this.own && !this.own.ended) {
      this.own = null;
    }
    this.changed('sessions');
    this.changed('own');
  }
}

export class Walk {
  constructor(session) {
    this.session = session;
    this.track = [];
    this.last = null;
    this.lost = null; // {since, lastPosition}
    this.ended = null; // reason
    this.map = null; // its WalkMap, made when first shown
    this.trailSince = null; // when the relay's trail starts later than the walk (a restart): from when
  }

  /** The relay's trail of this walk (feature "trail"): replaces the track drawn so far. */
  setTrail(trail, askedAt) {
    const points = trailPositions(trail, this.session);
    if (!points) return;
    this.track = mergeTrail(points, this.track, askedAt);
    this.trailSince = trailStartsLate(trail, this.session);
    if (!this.last && this.track.length) this.last = this.track[this.track.length - 1];
    if (this.map) this.map.setTrack(this.track);
  }

  add(position) {
    if (!position || typeof position.lat !== 'number') return false;
    markSeen(position);
    this.last = position;
    this.track.push(position);
    if (this.map) this.map.addPosition(position);
    return true;
  }
}
