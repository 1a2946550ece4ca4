// Messages between friends (relay feature "friends-map"): one thread per friend. The relay relays
// messages and forgets each once it is read (and hands a message to a browser only once), so the
// threads this browser has seen are kept here, in localStorage under the signed-in user's name,
// at most KEEP per friend; signing out deletes them.
//
// A message is {messageId, from, to, text, queuedAt, deliveredAt?, readAt?, read?}: `deliveredAt`
// and `readAt` are the relay's receipts for ours, `read` says we told the relay we read theirs.

const PREFIX = 'homeward.messages.';
const KEEP = 200;

export class MessageBook extends EventTarget {
  constructor() {
    super();
    this.owner = null;
    this.threads = new Map(); // friend's username -> [message], oldest first
  }

  /** Loads the threads of `username` (after a sign-in). */
  open(username) {
    if (this.owner === username) return;
    this.owner = username;
    this.threads = new Map();
    try {
      const saved = JSON.parse(localStorage.getItem(PREFIX + username) || '{}');
      for (const [friend, list] of Object.entries(saved)) if (Array.isArray(list)) this.threads.set(friend, list);
    } catch {
      // A damaged store starts empty.
    }
    this.changed();
  }

  /** At sign-out: this browser forgets the account's messages. */
  forget() {
    if (this.owner) localStorage.removeItem(PREFIX + this.owner);
    this.owner = null;
    this.threads = new Map();
    this.changed();
  }

  thread(friend) {
    return this.threads.get(friend) || [];
  }

  /** Messages from `friend` not yet read here. */
  unread(friend) {
    return this.thread(friend).filter((m) => m.from === friend && !m.read).length;
  }

  totalUnread() {
    let total = 0;
    for (const friend of this.threads.keys()) total += this.unread(friend);
    return total;
  }

  /** A message we sent (the reply of msg.send) or received (`msg`); a second copy updates the first. */
  add(message) {
    if (!this.owner || !message || typeof message.messageId !== 'string') return null;
    const friend = message.from === this.owner ? message.to : message.from;
    const list = this.threads.get(friend) || [];
    const known = list.find((m) => m.messageId === message.messageId);
    if (known) Object.assign(known, message, { read: known.read });
    else list.push({ ...message });
    this.threads.set(friend, list.slice(-KEEP));
    this.save();
    return friend;
  }

  /** A receipt for one of ours (`msg.delivered`, `msg.read`) or our own reading of theirs. */
  update(messageId, fields) {
    for (const list of this.threads.values()) {
      const message = list.find((m) => m.messageId === messageId);
      if (message) {
        Object.assign(message, fields);
        this.save();
        return message;
      }
    }
    return null;
  }

  save() {
    if (this.owner) {
      try {
        localStorage.setItem(PREFIX + this.owner, JSON.stringify(Object.fromEntries(this.threads)));
      } catch {
        // Storage full or disabled: the threads still live in this page.
      }
    }
    this.changed();
  }

  changed() {
    this.dispatchEvent(new CustomEvent('changed'));
  }
}

/** Where one of our messages is: "Read 21:42", "Delivered 21:41", or queued for an offline friend. */
export function deliveryState(message) {
  if (message.readAt) return { state: 'read', at: message.readAt };
  if (message.deliveredAt) return { state: 'delivered', at: message.deliveredAt };
  return { state: 'queued', at: message.queuedAt };
}
