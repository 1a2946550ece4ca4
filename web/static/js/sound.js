// The alarm's sound, where the browser allows it: browsers let a page make sound only after the user
// has interacted with it, so the audio context is created on the first tap and the alarm beeps
// through it; without one the alarm is silent but still takes over the screen.

let context = null;
let timer = null;

function unlock() {
  if (context) return;
  const Audio = window.AudioContext || window.webkitAudioContext;
  if (!Audio) return;
  try {
    context = new Audio();
  } catch {
    context = null;
  }
}

window.addEventListener('pointerdown', unlock, { once: true });
window.addEventListener('keydown', unlock, { once: true });

function beep() {
  if (!context || context.state !== 'running') return;
  const now = context.currentTime;
  for (const [offset, freq] of [[0, 880], [0.25, 660], [0.5, 880]]) {
    const osc = context.createOscillator();
    const gain = context.createGain();
    osc.frequency.value = freq;
    gain.gain.setValueAtTime(0.25, now + offset);
    gain.gain.exponentialRampToValueAtTime(0.001, now + offset + 0.22);
    osc.connect(gain).connect(context.destination);
    osc.start(now + offset);
    osc.stop(now + offset + 0.23);
  }
}

export function startAlarmSound() {
  if (timer) return;
  if (context && context.state === 'suspended') context.resume().catch(() => {});
  beep();
  timer = setInterval(beep, 2000);
}

export function stopAlarmSound() {
  clearInterval(timer);
  timer = null;
}

export function vibrate() {
  if (navigator.vibrate) navigator.vibrate([400, 200, 400, 200, 400]);
}
