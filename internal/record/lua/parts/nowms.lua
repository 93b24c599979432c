-- now in ms as a string, without formatting a number: seconds, then the first three of the
-- six microsecond digits (zero-padded when TIME gave fewer); t is TIME's answer
local us = t[2]
local now
if #us == 6 then
  now = t[1] .. string.sub(us, 1, 3)
else
  now = t[1] .. string.sub(string.rep('0', 6 - #us) .. us, 1, 3)
end
