-- A stored integer: decimal digits only, short enough to be exact in a Lua number.
local function isint(v)
  return #v <= 15 and string.find(v, '^%d+$') ~= nil
end
