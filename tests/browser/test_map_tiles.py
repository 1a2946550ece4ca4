"""Streets from the relay's own vector tiles (`--map-tiles-mbtiles`) in a real browser.

The MBTiles file is made here the way an operator makes one (deploy/README.md): a small OpenStreetMap
file around the test walk (a street, a footpath, a park, a lake and a house, written as OSM XML),
converted to PBF by Debian's osmium-tool and to vector tiles by Debian's tilemaker with the profile in
deploy/tilemaker/. The page must draw those streets from the relay alone (every request stays on the
relay's origin) and decode the real tiles correctly. The startup refusals (a missing, corrupt or raster
file) are Swift tests: Tests/HomewardServerTests/Process/MapTilesFlagTests.swift.
"""

from __future__ import annotations

import math
import shutil
import sqlite3
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO_ROOT, WEB_ARGS, Harness, browser_for, started_relay
from test_web_app import START, follow_walk_in_page, map_state, wait_track

PROFILE = REPO_ROOT / "deploy" / "tilemaker"
LAT, LON = START
# Colours of street-tiles.js's STYLE, as canvas pixels.
PARK = (0xC8, 0xE6, 0xB0)
WATER = (0xAA, 0xD3, 0xDF)
ROAD = (0xFF, 0xFF, 0xFF)


def osm_xml() -> str:
    """A street through the walk's start, a footpath, a park, a lake and a house, with markup in a name."""
    nodes = {
        1: (LAT, LON - 0.004), 2: (LAT, LON + 0.004),  # Testgatan, west-east through START
        3: (LAT - 0.003, LON - 0.0006), 4: (LAT + 0.003, LON - 0.0006),  # a footpath, south-north
        5: (LAT + 0.0005, LON - 0.003), 6: (LAT + 0.0005, LON - 0.001), 7: (LAT + 0.002, LON - 0.001), 8: (LAT + 0.002, LON - 0.003),
        9: (LAT - 0.0005, LON - 0.0018), 10: (LAT - 0.0005, LON - 0.0009), 11: (LAT - 0.0015, LON - 0.0009), 12: (LAT - 0.0015, LON - 0.0018),
        13: (LAT + 0.0002, LON + 0.0002), 14: (LAT + 0.0002, LON + 0.0004), 15: (LAT + 0.0003, LON + 0.0004), 16: (LAT + 0.0003, LON + 0.0002),
    }
    ways = [
        (100, [1, 2], {"highway": "residential", "name": "<b>Testgatan</b>"}),
        (101, [3, 4], {"highway": "footway"}),
        (102, [5, 6, 7, 8, 5], {"leisure": "park"}),
        (103, [9, 10, 11, 12, 9], {"natural": "water"}),
        (104, [13, 14, 15, 16, 13], {"building": "yes"}),
    ]
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', '<osm version="0.6" generator="homeward-test">']
    lines += [f' <node id="{i}" version="1" lat="{lat:.7f}" lon="{lon:.7f}"/>' for i, (lat, lon) in nodes.items()]
    for way_id, refs, tags in ways:
        lines.append(f' <way id="{way_id}" version="1">')
        lines += [f'  <nd ref="{r}"/>' for r in refs]
        lines += [f'  <tag k="{k}" v="{v.replace("<", "&lt;").replace(">", "&gt;")}"/>' for k, v in tags.items()]
        lines.append(" </way>")
    lines.append("</osm>")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def streets(tmp_path_factory) -> Path:
    """The MBTiles file of the streets around the test walk, made with osmium-tool and tilemaker."""
    for tool, package in (("osmium", "osmium-tool"), ("tilemaker", "tilemaker")):
        if not shutil.which(tool):
            pytest.fail(f"{tool} not found: apt-get install {package}", pytrace=False)
    work = tmp_path_factory.mktemp("streets")
    (work / "city.osm").write_text(osm_xml())
    subprocess.run(["osmium", "cat", str(work / "city.osm"), "-o", str(work / "city.osm.pbf"), "--overwrite"], check=True)
    bbox = f"{LON - 0.01},{LAT - 0.01},{LON + 0.01},{LAT + 0.01}"
    subprocess.run(["tilemaker", "--input", str(work / "city.osm.pbf"), "--output", str(work / "city.mbtiles"), "--bbox", bbox,
                    "--config", str(PROFILE / "config.json"), "--process", str(PROFILE / "process.lua")],
                   check=True, capture_output=True, cwd=work)
    return work / "city.mbtiles"


@pytest.fixture(scope="module")
def tiles_relay(relay_binary, streets, tmp_path_factory):
    with started_relay(relay_binary, tmp_path_factory.mktemp("tiles-relay"), *WEB_ARGS,
                       "--leaflet-dir", "/usr/share/javascript/leaflet", "--map-tiles-mbtiles", str(streets)) as relay:
        yield relay


def tile_of(lat: float, lon: float, z: int) -> tuple[int, int, float, float]:
    """The XYZ tile holding a point, and the point's place in it (0..1 east and south)."""
    n = 2 ** z
    x = (lon + 180) / 360 * n
    y = (1 - math.asinh(math.tan(math.radians(lat))) / math.pi) / 2 * n
    return int(x), int(y), x - int(x), y - int(y)


def fetch(relay, path: str) -> tuple[int, dict, bytes]:
    context = ssl.create_default_context(cafile=str(relay.ca_path))
    try:
        with urllib.request.urlopen(f"https://{relay.host}:{relay.port}{path}", context=context, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_the_relay_serves_tilemakers_tiles_gzipped_at_xyz_addresses_and_404_outside_the_file(tiles_relay, streets):
    with sqlite3.connect(streets) as db:
        minzoom, maxzoom = (int(db.execute("SELECT value FROM metadata WHERE name = ?", (k,)).fetchone()[0]) for k in ("minzoom", "maxzoom"))
    x, y, _, _ = tile_of(LAT, LON, maxzoom)
    status, headers, body = fetch(tiles_relay, f"/tiles/{maxzoom}/{x}/{y}.pbf")
    assert status == 200 and headers["Content-Encoding"] == "gzip" and body[:2] == b"\x1f\x8b", (status, headers)
    assert headers["Content-Type"] == "application/vnd.mapbox-vector-tile"
    assert "max-age" in headers["Cache-Control"]
    # Beyond the file's zoom range and outside its area: 404, which the page draws as nothing.
    for z in (maxzoom + 1, minzoom - 1):
        x, y, _, _ = tile_of(LAT, LON, z)
        assert fetch(tiles_relay, f"/tiles/{z}/{x}/{y}.pbf")[0] == 404
    assert fetch(tiles_relay, f"/tiles/{maxzoom}/0/0.pbf")[0] == 404


async def test_the_decoder_reads_tilemakers_tiles_where_the_streets_are(tiles_relay):
    """vector-tile.js on a real tile: the layers, the street's name as text, and its place in the tile."""
    async with browser_for(tiles_relay) as browser:
        page = await browser.page()
        await page.goto(browser.origin + "/")
        x, y, fx, fy = tile_of(LAT, LON, 14)
        tile = await page.evaluate("""async (url) => {
            const { decodeTile } = await import('/static/js/vector-tile.js');
            const tile = decodeTile(await (await fetch(url)).arrayBuffer());
            return Object.fromEntries(Object.entries(tile.layers).map(([name, layer]) =>
                [name, { extent: layer.extent, features: layer.features.map((f) => ({ type: f.type, properties: f.properties, geometry: f.geometry })) }]));
        }""", f"/tiles/14/{x}/{y}.pbf")
        assert {"transportation", "park", "water", "building"} <= set(tile), sorted(tile)
        roads = tile["transportation"]["features"]
        street = next(f for f in roads if f["properties"].get("name") == "<b>Testgatan</b>")
        assert street["type"] == 2 and street["properties"]["class"] == "minor"
        assert any(f["properties"] == {"class": "path"} for f in roads)
        # The street runs west-east through the walk's start: its y is the start's, in tile units.
        extent = tile["transportation"]["extent"]
        ys = [point[1] for part in street["geometry"] for point in part]
        assert all(abs(value - fy * extent) <= 0.01 * extent for value in ys), (ys, fy * extent)
        assert tile["park"]["features"][0]["type"] == 3 and tile["building"]["features"][0]["type"] == 3
        lake = tile["water"]["features"][0]["geometry"][0]
        assert lake[0] == lake[-1], "a polygon's ring is closed"


async def test_with_mbtiles_the_walk_map_draws_streets_from_the_relay_only(tiles_relay, screenshots):
    hw = Harness(tiles_relay)
    try:
        async with browser_for(tiles_relay) as browser:  # and at its end: no request off the relay's origin
            page = await browser.page()
            response = await page.goto(browser.origin + "/")
            csp = response.headers["content-security-policy"]
            assert "img-src 'self';" in csp and "connect-src 'self' wss://" in csp and "default-src 'none'" in csp, csp
            walker, _ = await follow_walk_in_page(hw, page, browser, "streets")
            await wait_track(page, "#walk-map", 1)
            assert (await map_state(page, "#walk-map"))["renderer"] == "leaflet-streets"
            await page.wait_for_function("() => Number(document.querySelector('#walk-map').dataset.streetFeatures || 0) >= 3")
            # The walk is shown at zoom 17, deeper than the file's 14: the deepest tiles are enlarged.
            assert any("/tiles/14/" in u for u in browser.requests), browser.requests
            assert not any("/tiles/17/" in u for u in browser.requests)
            colours = await page.evaluate("""() => {
                const seen = new Set();
                for (const canvas of document.querySelectorAll('#walk-map canvas.leaflet-tile')) {
                    const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
                    for (let i = 0; i < data.length; i += 4) seen.add(`${data[i]},${data[i + 1]},${data[i + 2]}`);
                }
                return [...seen];
            }""")
            for name, colour in (("road", ROAD), ("park", PARK), ("water", WATER)):
                assert ",".join(map(str, colour)) in colours, f"no {name} pixels on the map"
            assert "OpenStreetMap" in await page.text_content("#walk-map .leaflet-control-attribution")
            await screenshots(page, "walk-map-streets")
            await walker.close()
    finally:
        await hw.aclose()


async def test_without_leaflet_the_own_map_draws_the_streets_under_the_walk(relay_binary, streets, tmp_path_factory):
    with started_relay(relay_binary, tmp_path_factory.mktemp("streets-plain"), *WEB_ARGS, "--leaflet-dir", "/nonexistent/leaflet",
                       "--map-tiles-mbtiles", str(streets)) as relay:
        hw = Harness(relay)
        try:
            async with browser_for(relay) as browser:
                page = await browser.page()
                walker, _ = await follow_walk_in_page(hw, page, browser, "plainst")
                await wait_track(page, "#walk-map", 1)
                assert (await map_state(page, "#walk-map"))["renderer"] == "plain"
                await page.wait_for_function("() => Number(document.querySelector('#walk-map').dataset.streetFeatures || 0) >= 3")
                colours = await page.eval_on_selector("#walk-map canvas.plain-streets", """canvas => {
                    const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
                    const seen = new Set();
                    for (let i = 0; i < data.length; i += 4) seen.add(`${data[i]},${data[i + 1]},${data[i + 2]}`);
                    return [...seen];
                }""")
                assert ",".join(map(str, ROAD)) in colours, "no road pixels under the walk"
                # The walk's own drawing stays on top of the streets.
                assert await page.locator("#walk-map circle.position:not(.hidden)").count() == 1
                assert not [u for u in browser.requests if "/vendor/" in u]
                await walker.close()
        finally:
            await hw.aclose()
