// Asks the relay what the map may use (GET /v1/web-config) and loads Leaflet from the relay when it
// is installed. Nothing here contacts anyone but the relay; tiles come only from a server the
// operator configured, or the relay's own vector tiles (street-tiles.js).

let loaded = null;

export function loadMapSupport() {
  if (!loaded) loaded = load();
  return loaded;
}

async function load() {
  let config = { leaflet: null, tiles: null, vectorTiles: null };
  try {
    const response = await fetch('/v1/web-config', { credentials: 'omit', cache: 'no-store' });
    if (response.ok) config = await response.json();
  } catch {
    // Offline at first load: draw the plain map.
  }
  let leaflet = null;
  if (config.leaflet) {
    try {
      await Promise.all([addStylesheet(config.leaflet.stylesheet), addScript(config.leaflet.script)]);
      leaflet = window.L || null;
    } catch {
      leaflet = null;
    }
  }
  return { leaflet, tiles: config.tiles, vectorTiles: config.vectorTiles || null };
}

function addScript(src) {
  return new Promise((resolve, reject) => {
    const script = document.createElement('script');
    script.src = src;
    script.addEventListener('load', resolve);
    script.addEventListener('error', reject);
    document.head.append(script);
  });
}

function addStylesheet(href) {
  return new Promise((resolve, reject) => {
    const link = document.createElement('link');
    link.rel = 'stylesheet';
    link.href = href;
    link.addEventListener('load', resolve);
    link.addEventListener('error', reject);
    document.head.append(link);
  });
}
