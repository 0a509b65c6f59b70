package config

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as a Go duration string ("150ms",
// "1s", "1m30s") in TOML and on the command line. A bare number is refused:
// "100" could mean milliseconds or seconds, and guessing wrong silently
// changes failure detection by three orders of magnitude.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d like time.Duration ("150ms").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want a Go duration such as \"150ms\" or \"2s\"): %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalTOML accepts only a TOML string: a TOML integer would otherwise
// reach UnmarshalText as "100" and fail with a less helpful message.
func (d *Duration) UnmarshalTOML(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("invalid duration %v (%T): write it as a quoted Go duration such as \"150ms\"", v, v)
	}
	return d.UnmarshalText([]byte(s))
}

// FileMode is the permission bits of a file, written as a quoted octal
// string ("0660", "660" or "0o660") in TOML and on the command line. TOML
// integers are refused: TOML has no leading-zero octal, so socket_mode = 660
// would be decimal 660, and the decoder cannot tell 0o660 from 432 either.
type FileMode fs.FileMode

// Perm returns m as an fs.FileMode.
func (m FileMode) Perm() fs.FileMode { return fs.FileMode(m) }

// String formats m as four octal digits ("0660").
func (m FileMode) String() string { return fmt.Sprintf("%04o", uint32(m)) }

// MarshalText writes m as four octal digits.
func (m FileMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText parses an octal permission string.
func (m *FileMode) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	digits := strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0O")
	v, err := strconv.ParseUint(digits, 8, 32)
	if digits == "" || err != nil {
		return fmt.Errorf("invalid file mode %q: want octal permission bits such as \"0660\"", s)
	}
	if v > 0o777 {
		return fmt.Errorf("invalid file mode %q: only permission bits (at most 0777) are allowed", s)
	}
	*m = FileMode(v)
	return nil
}

// UnmarshalTOML accepts only a TOML string (see FileMode).
func (m *FileMode) UnmarshalTOML(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("invalid file mode %v (%T): write it as a quoted octal string such as \"0660\"", v, v)
	}
	return m.UnmarshalText([]byte(s))
}
