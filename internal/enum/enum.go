// Package enum gives the project's integer enums their String: a value's
// name is its entry in the list of names, in value order, written beside
// the type, so a new value is a new name in one list and no switch can
// miss it.
package enum

// Integer is an integer enum type.
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Name returns the name of v among names (names[0] is value 0's); ok is
// false for a value out of range or named "" (a value not in use).
func Name[E Integer](v E, names ...string) (name string, ok bool) {
	if v < 0 || uint64(v) >= uint64(len(names)) {
		return "", false
	}
	return names[v], names[v] != ""
}
