package record

// ExpandLua is expandLua, for the external benchmarks that cut a script's
// source.
var ExpandLua = expandLua
