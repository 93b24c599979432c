// Package apicheck lists the exported API of the module's public packages,
// one declaration per line in the manner of Go's own api/*.txt files, so
// that a test can hold the surface to the files recorded in the
// repository's api/ folder: every new exported name is a decision made in a
// diff, never an accident.
package apicheck
