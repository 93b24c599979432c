package main

import (
	"encoding/json"
	"io"
	"os"
)

// style paints text with ANSI colours when on, and leaves it alone when off.
type style struct{ on bool }

// styleFor colours only a terminal: w must be an *os.File whose mode is a
// character device, and NO_COLOR must be unset (https://no-color.org).
func styleFor(w io.Writer) style {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" {
		return style{}
	}
	fi, err := f.Stat()
	return style{on: err == nil && fi.Mode()&os.ModeCharDevice != 0}
}

func (s style) paint(code, text string) string {
	if !s.on || text == "" {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

func (s style) bold(t string) string   { return s.paint("1", t) }
func (s style) dim(t string) string    { return s.paint("2", t) }
func (s style) red(t string) string    { return s.paint("31", t) }
func (s style) green(t string) string  { return s.paint("32", t) }
func (s style) yellow(t string) string { return s.paint("33", t) }

// server paints a server's name in its own colour (A cyan, B magenta).
func (s style) server(name string) string {
	switch name {
	case "A":
		return s.paint("1;36", name)
	case "B":
		return s.paint("1;35", name)
	}
	return s.paint("1", name)
}

// emit writes a command's report: one indented JSON object with --json,
// else text for people (coloured on a terminal).
func emit(w io.Writer, asJSON bool, rep any, text func(io.Writer, style)) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	text(w, styleFor(w))
	return nil
}
