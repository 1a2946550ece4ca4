// Sign in, or create an account. The password goes only into the WebSocket message; the token that
// comes back is kept in localStorage by app.js.

import { h, mount, formValues } from './dom.js';

export function renderSignIn(app, main, options = {}) {
  let mode = 'login';
  const message = h('p', { class: 'error', role: 'alert' }, options.message || '');

  const draw = () => {
    const registering = mode === 'register';
    const form = h('form', { class: 'card', id: 'sign-in-form', onsubmit: submit },
      h('h2', {}, registering ? 'Create an account' : 'Sign in'),
      h('label', {}, 'Username', h('input', {
        name: 'username', autocomplete: 'username', required: true, minlength: 3, maxlength: 32,
        pattern: '[A-Za-z0-9_.\\-]+', autocapitalize: 'none', spellcheck: 'false',
      })),
      registering && h('label', {}, 'Your name (shown to friends)', h('input', { name: 'name', maxlength: 64, autocomplete: 'nickname' })),
      h('label', {}, 'Password', h('input', {
        name: 'password', type: 'password', required: true, minlength: 8, maxlength: 256,
        autocomplete: registering ? 'new-password' : 'current-password',
      })),
      message,
      h('button', { type: 'submit', class: 'primary' }, registering ? 'Create account' : 'Sign in'),
      h('button', { type: 'button', class: 'link', onclick: () => { mode = registering ? 'login' : 'register'; message.textContent = ''; draw(); } },
        registering ? 'I have an account: sign in' : 'New here? Create an account'));
    mount(main, h('header', { class: 'brand' }, h('h1', {}, 'Homeward'), h('p', {}, 'Walk home together.')), form);
  };

  async function submit(event) {
    event.preventDefault();
    const form = event.currentTarget;
    const values = formValues(form);
    const fields = { username: values.username.toLowerCase(), password: values.password };
    if (mode === 'register' && values.name) fields.name = values.name;
    const button = form.querySelector('button[type=submit]');
    button.disabled = true;
    message.textContent = '';
    try {
      const reply = await app.socket.request(mode, fields);
      await app.signedIn(reply);
    } catch (error) {
      message.textContent = explain(error, mode);
      button.disabled = false;
    }
  }

  draw();
  return () => {};
}

function explain(error, mode) {
  switch (error.code) {
    case 'unauthenticated': return 'Wrong username or password.';
    case 'conflict': return 'That username is taken.';
    case 'rate_limited': return 'Too many attempts. Wait a few minutes and try again.';
    case 'bad_request': return mode === 'register'
      ? 'Usernames are 3–32 letters, digits, _ . or -; passwords 8–256 characters.'
      : error.message;
    case 'offline': return 'Not connected to the relay; it will retry by itself.';
    default: return error.message || 'Something went wrong.';
  }
}
