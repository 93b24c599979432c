package record

import (
	_ "embed"
	"fmt"
	"strings"
)

// Lua that more than one script carries. Redis scripts share no code (a
// function one script could call would be another script, and a function
// each defines costs a closure per call), so a script names a part with a
// line "--#include <name>" and gets the part's text there, before its SHA is
// taken: one source for each, the same bytes in every script.
var (
	//go:embed lua/parts/nowms.lua
	nowMSPart string
	//go:embed lua/parts/isint.lua
	isIntPart string
)

// luaPart is the text of the part named name.
func luaPart(name string) (string, bool) {
	switch name {
	case "nowms":
		return nowMSPart, true
	case "isint":
		return isIntPart, true
	}
	return "", false
}

// includePrefix starts a line that names a part.
const includePrefix = "--#include "

// expandLua is src with each "--#include <name>" line replaced by the part
// name. A name no part has is a fault of this package's sources, found the
// first time the package loads (TestScriptsIncludeOnlyKnownParts).
func expandLua(src string) string {
	if !strings.Contains(src, includePrefix) {
		return src
	}
	lines := strings.SplitAfter(src, "\n")
	var b strings.Builder
	for _, l := range lines {
		name, ok := strings.CutPrefix(strings.TrimRight(l, "\n"), includePrefix)
		if !ok {
			b.WriteString(l)
			continue
		}
		part, known := luaPart(name)
		if !known {
			panic(fmt.Sprintf("record: a script includes %q, which no part of lua/parts is", name))
		}
		b.WriteString(part)
	}
	return b.String()
}
