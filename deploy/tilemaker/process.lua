-- The Homeward web app's map: roads and paths (with a class the app styles), water, parks and
-- buildings. Nothing else, so that a city's file stays small. Used by tilemaker:
--   tilemaker --input city.osm.pbf --output city.mbtiles \
--     --config deploy/tilemaker/config.json --process deploy/tilemaker/process.lua

node_keys = {}

-- highway=* value -> the class the app draws it as.
local road_class = {
  motorway = "major", trunk = "major", primary = "major", secondary = "major",
  motorway_link = "major", trunk_link = "major", primary_link = "major", secondary_link = "major",
  tertiary = "minor", tertiary_link = "minor", unclassified = "minor", residential = "minor",
  living_street = "minor", service = "minor", road = "minor", pedestrian = "path",
  footway = "path", path = "path", cycleway = "path", steps = "path", track = "path", bridleway = "path",
}

local parks = { park = true, garden = true, playground = true, pitch = true, nature_reserve = true }
local green_landuse = { grass = true, forest = true, meadow = true, recreation_ground = true, cemetery = true, village_green = true }

function node_function(node)
end

function way_function(way)
  local highway = way:Find("highway")
  local closed = way:IsClosed()
  if highway ~= "" and road_class[highway] and not (closed and way:Find("area") == "yes") then
    way:Layer("transportation", false)
    way:Attribute("class", road_class[highway])
    local name = way:Find("name")
    if name ~= "" then way:Attribute("name", name) end
    return
  end
  if not closed then
    if way:Find("waterway") == "river" or way:Find("waterway") == "canal" or way:Find("waterway") == "stream" then
      way:Layer("water", false)
      way:Attribute("class", "waterway")
    end
    return
  end
  if way:Find("natural") == "water" or way:Find("waterway") == "riverbank" or way:Find("landuse") == "reservoir" or way:Find("landuse") == "basin" then
    way:Layer("water", true)
    way:Attribute("class", "water")
  elseif parks[way:Find("leisure")] or green_landuse[way:Find("landuse")] or way:Find("natural") == "wood" then
    way:Layer("park", true)
    way:Attribute("class", "park")
  elseif way:Find("building") ~= "" then
    way:Layer("building", true)
  end
end

function relation_scan_function(relation)
  if relation:Find("type") == "multipolygon" and (relation:Find("natural") == "water" or parks[relation:Find("leisure")] or relation:Find("building") ~= "") then
    relation:Accept()
  end
end

function relation_function(relation)
  way_function(relation)
end
