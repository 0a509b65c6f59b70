// Package errtext turns error texts meant for a terminal into one line
// for a log: hashicorp/go-multierror (which memberlist returns from Join)
// writes "1 error occurred:\n\t* …\n\n", which a log line shows as raw
// escapes or splits over several lines.
package errtext

import (
	"regexp"
	"strings"
)

// oneLineError is an error whose text was flattened; it still unwraps to
// the original, for errors.Is and errors.As.
type oneLineError struct {
	msg string
	err error
}

func (e *oneLineError) Error() string { return e.msg }
func (e *oneLineError) Unwrap() error { return e.err }

// multiText matches go-multierror's list: a count line, then one
// "\t* item" line per error, then blank lines.
var multiText = regexp.MustCompile(`\d+ errors? occurred:\n((?:\t\* [^\n]*(?:\n|$))+)\n*`)

// OneLine returns err with its text on one line: a multi-error's items
// joined by "; ", any other line break a space. An error already on one
// line (and nil) is returned as it is.
func OneLine(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if !strings.Contains(msg, "\n") {
		return err
	}
	msg = multiText.ReplaceAllStringFunc(msg, func(m string) string {
		var items []string
		for l := range strings.SplitSeq(m, "\n") {
			if it, ok := strings.CutPrefix(l, "\t* "); ok {
				items = append(items, strings.TrimSpace(it))
			}
		}
		return strings.Join(items, "; ")
	})
	msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", " ")), " ")
	return &oneLineError{msg: msg, err: err}
}
