package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// This file turns what the TOML decoder and Validate report into messages
// that say what to do: the file and line, the key, the value expected and
// the line to write instead. A person reading "Invalid integer "0660":
// cannot have leading zeroes" should not have to know TOML's grammar to
// learn that the mode wants quotes.

// keyKind is how a key's value is written in TOML.
type keyKind int

const (
	kindString keyKind = iota // a quoted string (durations and modes too)
	kindList                  // a list of quoted strings
	kindNumber                // a bare integer or float
	kindBool                  // true or false
)

// durationKeys are the keys of type Duration.
var durationKeys = map[string]bool{}

// knownKeys lists every dotted key, for "did you mean" hints.
var knownKeys []string

// keyKinds maps every dotted key ("api.socket_mode") to its kind, read from
// the Config struct so a new key needs no entry here.
var keyKinds = func() map[string]keyKind {
	out := map[string]keyKind{}
	ct := reflect.TypeFor[Config]()
	for sect := range ct.Fields() {
		st := sect.Type
		if st.Kind() == reflect.Slice { // [[check]], [[hook]]
			st = st.Elem()
		}
		if st.Kind() == reflect.Map { // [elections.NAME]: the [election] keys
			continue
		}
		for f := range st.Fields() {
			key := sect.Tag.Get("toml") + "." + f.Tag.Get("toml")
			knownKeys = append(knownKeys, key)
			switch f.Type.Kind() {
			case reflect.Slice:
				out[key] = kindList
			case reflect.Bool:
				out[key] = kindBool
			case reflect.String:
				out[key] = kindString
			default:
				out[key] = kindNumber
			}
			if f.Type == reflect.TypeFor[Duration]() || f.Type == reflect.TypeFor[FileMode]() {
				out[key] = kindString
			}
			if f.Type == reflect.TypeFor[Duration]() {
				durationKeys[key] = true
			}
		}
	}
	return out
}()

// fileLine is one "key = value" line of a TOML file.
type fileLine struct {
	n     int    // line number, from 1
	key   string // dotted: table + "." + key
	leaf  string // the key as written
	value string // the value as written, comment and spaces trimmed
}

// scanLines finds the "key = value" lines of a TOML file, with the table
// each is in. It is a forgiving scan for messages, not a parser: it works
// on files the decoder refused.
func scanLines(data string) []fileLine {
	var out []fileLine
	table := ""
	for i, line := range strings.Split(data, "\n") {
		s := strings.TrimSpace(line)
		switch {
		case s == "" || s[0] == '#':
			continue
		case s[0] == '[':
			table = strings.TrimSpace(strings.Trim(s[:strings.IndexByte(s+"]", ']')], "[]"))
			continue
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			continue
		}
		leaf := strings.TrimSpace(s[:eq])
		value := strings.TrimSpace(s[eq+1:])
		if h := strings.Index(value, " #"); h >= 0 && !strings.ContainsAny(value[:h], `"'`) {
			value = strings.TrimSpace(value[:h])
		}
		key := leaf
		if table != "" {
			key = table + "." + leaf
		}
		out = append(out, fileLine{n: i + 1, key: key, leaf: leaf, value: value})
	}
	return out
}

// lineOf returns the line that sets key in data, or 0.
func lineOf(data, key string) int {
	for _, l := range scanLines(data) {
		if l.key == key {
			return l.n
		}
	}
	return 0
}

// parseError explains a TOML syntax or type error in file name.
func parseError(name, data string, err error) error {
	var line int
	var msg string
	var pe toml.ParseError
	if errors.As(err, &pe) {
		line, msg = pe.Position.Line, pe.Message
		if msg == "" {
			msg = pe.Error()
		}
	} else if m := decodeErrorRE.FindStringSubmatch(err.Error()); m != nil {
		// The decoder's type errors are plain errors in this format.
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else {
		return fmt.Errorf("config %s: %w", name, err)
	}
	var fl *fileLine
	for _, l := range scanLines(data) {
		if l.n == line {
			fl = &l
			break
		}
	}
	if fl == nil {
		return fmt.Errorf("config %s, line %d: %s", name, line, msg)
	}
	kind, known := keyKinds[fl.key]
	if !known {
		return fmt.Errorf("config %s, line %d: %s: %s", name, line, fl.key, msg)
	}
	return fmt.Errorf("config %s, line %d: %s = %s: %s\n  %s", name, line, fl.key, fl.value, msg, rewrite(fl.key, fl.leaf, fl.value, kind))
}

// decodeErrorRE matches the decoder's own type errors, which carry the line
// only in their text.
var decodeErrorRE = regexp.MustCompile(`^toml: line (\d+) \(last key "[^"]*"\): (.*)$`)

// rewrite says how to write value for key (leaf, as written) of kind.
func rewrite(key, leaf, value string, kind keyKind) string {
	bare := strings.Trim(value, `"'`)
	switch {
	case durationKeys[key]:
		if _, err := time.ParseDuration(bare); err != nil {
			return fmt.Sprintf("this key takes a quoted Go duration with its unit; write e.g.: %s = \"150ms\"", leaf)
		}
	case key == "api.socket_mode":
		if len(bare) == 3 {
			bare = "0" + bare
		}
		return fmt.Sprintf("this key takes a quoted octal string; write: %s = %q", leaf, bare)
	}
	switch kind {
	case kindString:
		return fmt.Sprintf("this key takes a quoted string; write: %s = %q", leaf, bare)
	case kindList:
		items := strings.Split(strings.Trim(value, "[] "), ",")
		q := make([]string, 0, len(items))
		for _, it := range items {
			if it = strings.Trim(strings.TrimSpace(it), `"'`); it != "" {
				q = append(q, fmt.Sprintf("%q", it))
			}
		}
		return fmt.Sprintf("this key takes a list of quoted strings; write: %s = [%s]", leaf, strings.Join(q, ", "))
	case kindBool:
		return fmt.Sprintf("this key takes true or false, without quotes; write: %s = %s", leaf, strings.ToLower(bare))
	default:
		return fmt.Sprintf("this key takes a number, without quotes; write: %s = %s", leaf, bare)
	}
}

// locate marks each problem of a validation error with where the value came
// from: the flag that gave it (flags come last, so theirs is the value in
// force), else the line of file name that sets it, or, for a key the file
// does not set, where to set it. name is "" when no file was read.
func locate(ve *ValidationError, name, data string, flags *Flags) {
	for _, p := range ve.Problems {
		base, _, _ := strings.Cut(p.Key, "[") // a list item's key is the list's
		if flag, ok := flags.flagFor(p.Key); ok {
			p.Flag = flag
			if flags.lists[base] {
				p.Hint = listHint(base, flags.given[base])
			}
			continue
		}
		if name == "" {
			continue
		}
		if n := lineOf(data, base); n > 0 {
			p.Where = fmt.Sprintf("line %d", n)
			continue
		}
		table, leaf, _ := strings.Cut(base, ".")
		if keyKinds[base] == kindList {
			p.Hint = fmt.Sprintf("%s does not set it: add %s = [\"…\", \"…\"] under [%s], or pass -%s=…,… (comma-separated)", name, leaf, table, base)
			continue
		}
		p.Hint = fmt.Sprintf("%s does not set it: add %s = … under [%s], or pass -%s=…", name, leaf, table, base)
	}
}
